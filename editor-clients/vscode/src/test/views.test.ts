// The Todos and Tasks views' models, fed by todos/changed and tasks/changed from the daemon.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { statusText, taskNodes, todoNodes } from "../models";
import type { TasksChanged, TodosChanged } from "../protocol";
import { type Daemon, nextEvent, startDaemon } from "../testing/daemon";

describe("todos and tasks views", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon();
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  test("todo_write pushes todos/changed, rendered as tree nodes", async () => {
    const changed = nextEvent<TodosChanged>(
      (l) => daemon.api.onNotification("todos/changed", l),
      "todos/changed",
    );
    const result = await daemon.api.callTool("todo_write", { action: "add", task: "write docs" });
    assert.equal(result.isError, false, JSON.stringify(result));
    const { todos } = await changed;
    assert.deepEqual(
      todos.map((t) => [t.task, t.status]),
      [["write docs", "pending"]],
    );
    assert.deepEqual(await daemon.api.listTodos(), todos);
    const [node] = todoNodes(todos);
    assert.ok(node);
    assert.equal(node.label, "write docs");
    assert.equal(node.description, "pending");
    assert.equal(node.icon, "circle-large-outline");
  });

  test("task_create pushes tasks/changed; dependencies become children", async () => {
    const first = await daemon.api.callTool("task_create", { title: "design" });
    const design = first.content as { id: string };
    const changed = nextEvent<TasksChanged>(
      (l) => daemon.api.onNotification("tasks/changed", l),
      "tasks/changed with two tasks",
      (e) => e.tasks.length === 2,
    );
    await daemon.api.callTool("task_create", { title: "build", depends_on: [design.id] });
    const { tasks } = await changed;
    const nodes = taskNodes(tasks);
    const build = nodes.find((n) => n.label === "build");
    const designNode = nodes.find((n) => n.label === "design");
    assert.ok(build && designNode, JSON.stringify(nodes));
    assert.equal(designNode.description, "pending · ready");
    assert.equal(build.description, "pending · waits on 1");
    assert.deepEqual(
      build.children.map((c) => [c.label, c.description]),
      [["design", "depends on · pending"]],
    );
    assert.match(build.tooltip, new RegExp(`depends on: ${design.id}`));
    assert.deepEqual((await daemon.api.listTasks()).map((t) => t.title).sort(), [
      "build",
      "design",
    ]);
  });
});

test("the status bar shows state, running jobs and mode", () => {
  assert.deepEqual(statusText("running", 0, undefined), {
    text: "$(tools) toold",
    tooltip: "toold: running\n0 background jobs running",
  });
  const busy = statusText("running", 2, "auto");
  assert.equal(busy.text, "$(tools) toold $(loading~spin) 2");
  assert.match(busy.tooltip, /permission mode: auto/);
  assert.equal(statusText("failed", 0, undefined).text, "$(error) toold");
});
