// Background jobs: background_run, the jobs/finished notification, jobs/get, jobs/cancel.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { ResponseError } from "vscode-jsonrpc/node";

import { jobFinishedMessage, JobsModel, renderJob, renderResult } from "../models";
import { ERROR_CODES, type JobFinished } from "../protocol";
import { type Daemon, nextEvent, startDaemon } from "../testing/daemon";

function submittedId(text: string): string {
  const match = /background task (\S+)/.exec(text);
  assert.ok(match?.[1], `no job id in ${JSON.stringify(text)}`);
  return match[1];
}

describe("background jobs", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon();
  });

  after(async () => {
    assert.equal(await daemon.close(), 0, daemon.stderr());
  });

  const finished = (jobId: string): Promise<JobFinished> =>
    nextEvent<JobFinished>(
      (listener) => daemon.api.onNotification("jobs/finished", listener),
      `jobs/finished for ${jobId}`,
      (event) => event.jobId === jobId,
    );

  test("background_run ends with a jobs/finished notification and jobs/get output", async () => {
    const model = new JobsModel();
    const events: JobFinished[] = [];
    const sub = daemon.api.onNotification("jobs/finished", (e) => events.push(e));
    // Subscribe before submitting: a fast job may finish before the call returns.
    const pending = nextEvent<JobFinished>(
      (listener) => daemon.api.onNotification("jobs/finished", listener),
      "jobs/finished",
    );
    const result = await daemon.api.callTool("background_run", { command: "echo from-the-job" });
    assert.equal(result.isError, false, renderResult(result).text);
    const jobId = submittedId(renderResult(result).text);
    const event = await pending;
    sub.dispose();
    assert.equal(event.jobId, jobId);
    assert.equal(event.status, "done");
    assert.equal(event.exitCode, 0);
    assert.equal(event.command, "echo from-the-job");
    assert.deepEqual(
      events.map((e) => e.jobId),
      [jobId],
    );

    const message = jobFinishedMessage(event);
    assert.equal(message.ok, true);
    assert.match(
      message.text,
      new RegExp(`job ${jobId} \`echo from-the-job\` finished \\(exit 0\\)`),
    );

    model.reset(await daemon.api.listJobs());
    assert.equal(model.running, 0);
    assert.ok(model.list().some((j) => j.jobId === jobId && j.status === "done"));

    const detail = await daemon.api.getJob(jobId);
    assert.equal(detail.output?.trim(), "from-the-job");
    assert.match(renderJob(detail), /^# job \S+: echo from-the-job\n# status: done, exit 0/);
  });

  test("jobs/cancel kills a running job, which then reports cancelled", async () => {
    const model = new JobsModel();
    const result = await daemon.api.callTool("background_run", {
      command: "sleep 30",
      timeout: 60,
    });
    const jobId = submittedId(renderResult(result).text);
    const ended = finished(jobId);
    model.reset(await daemon.api.listJobs());
    assert.equal(model.running, 1);
    assert.equal(model.list()[0]?.jobId, jobId, "running jobs sort first");

    const cancelled = await daemon.api.cancelJob(jobId);
    assert.equal(cancelled.jobId, jobId);
    const event = await ended;
    assert.equal(event.status, "cancelled");
    model.finished(event);
    assert.equal(model.running, 0);
    assert.equal(jobFinishedMessage(event).ok, false);
  });

  test("an unknown job is a NotFound error", async () => {
    await assert.rejects(daemon.api.getJob("nope1234"), (error: unknown) => {
      assert.ok(error instanceof ResponseError);
      assert.equal(error.code, ERROR_CODES.NotFound);
      return true;
    });
  });
});
