-- Drives editor-clients/neovim against the real daemon inside `nvim --headless`.
-- Run by tests/clients/test_neovim.py with:
--   TOOLD_TEST_CMD  JSON list that starts the daemon (["python", "-m", "toold", "serve"])
--   TOOLD_TEST_WS   a workspace folder holding main.py with "needle" in it
-- Prints "ok - NAME" / "not ok - NAME: ERROR" lines and exits non-zero on any failure.

local results = { passed = 0, failed = 0 }

local function out(line)
  io.stdout:write(line .. "\n")
  io.stdout:flush()
end

local function check(cond, message, ...)
  if not cond then
    error(string.format(message, ...), 2)
  end
end

local function wait_for(what, predicate, timeout_ms)
  local ok = vim.wait(timeout_ms or 20000, predicate, 20)
  check(ok, "timed out waiting for %s", what)
end

local function test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    results.passed = results.passed + 1
    out("ok - " .. name)
  else
    results.failed = results.failed + 1
    out("not ok - " .. name .. ": " .. tostring(err))
  end
end

local function contains(lines, pattern)
  for _, line in ipairs(lines) do
    if line:find(pattern) then
      return true
    end
  end
  return false
end

local function read_file(path)
  local f = io.open(path, "r")
  if f == nil then
    return nil
  end
  local text = f:read("*a")
  f:close()
  return text
end

-- Everything the plugin tells the user, captured.
local notes = {}
vim.notify = function(msg, level)
  table.insert(notes, { msg = msg, level = level })
end

local function find_note(pattern)
  for _, note in ipairs(notes) do
    if note.msg:find(pattern) then
      return note
    end
  end
  return nil
end

-- Permission prompts, answered by the test through a stubbed vim.ui.select.
local selects = {}
local answer = "Allow"
local answer_later = false
vim.ui.select = function(items, opts, on_choice)
  -- What the window showed while the question was asked: the diff split, if any.
  local shown = nil
  local preview = require("toold.ui").find_buffer("preview")
  if preview ~= nil and vim.fn.bufwinid(preview) ~= -1 then
    shown = {
      lines = vim.api.nvim_buf_get_lines(preview, 0, -1, false),
      filetype = vim.api.nvim_buf_get_option(preview, "filetype"),
    }
  end
  table.insert(selects, { items = items, prompt = opts.prompt, preview = shown })
  if answer_later then
    vim.defer_fn(function()
      on_choice(answer)
    end, 50)
  else
    on_choice(answer)
  end
end

local ws = os.getenv("TOOLD_TEST_WS")
local cmd_json = os.getenv("TOOLD_TEST_CMD")
if ws == nil or cmd_json == nil then
  out("not ok - environment: TOOLD_TEST_WS and TOOLD_TEST_CMD must be set")
  vim.cmd("cquit")
end
local cmd = vim.json.decode(cmd_json)

vim.cmd("runtime plugin/toold.lua")
local toold = require("toold")

local function main()

test("setup and request: tools/list through the real daemon", function()
  toold.setup({ cmd = cmd, root_dir = ws, config = { permissions = { mode = "default" } } })
  check(toold.root_dir() == ws, "root_dir is %s", toold.root_dir())
  local tools = toold.request("tools/list", { format = "native" }, 20000).tools
  local names = {}
  for _, tool in ipairs(tools) do
    names[tool.name] = true
  end
  for _, expected in ipairs({ "grep", "read_file", "write_file", "background_run" }) do
    check(names[expected], "%s missing from tools/list", expected)
  end
  check(vim.fn.exists(":TooldCall") == 2, ":TooldCall is not defined")
end)

test("request raises with the daemon's error message", function()
  local ok, err = pcall(toold.request, "tools/call", { name = "no_such_tool" })
  check(not ok, "an unknown tool did not raise")
  check(tostring(err):find("Unknown tool: no_such_tool", 1, true), "unexpected error: %s", err)
end)

test(":TooldTools lists the tools in toold://tools", function()
  vim.cmd("TooldTools")
  local lines = require("toold.ui").buffer_lines("tools")
  check(contains(lines, "^grep%s"), "no grep line in %s", vim.inspect(lines))
  check(contains(lines, "requires: file_path"), "required arguments are not shown")
  local completions = vim.fn.getcompletion("TooldCall gre", "cmdline")
  check(vim.tbl_contains(completions, "grep"), "completions %s", vim.inspect(completions))
end)

test(":TooldCall runs grep and writes its output to toold://call/grep", function()
  vim.cmd([[TooldCall grep {"pattern": "needle"}]])
  local ui = require("toold.ui")
  wait_for("the grep result", function()
    return #ui.buffer_lines("call/grep") > 0 and ui.buffer_lines("call/grep")[1] ~= ""
  end)
  local lines = ui.buffer_lines("call/grep")
  check(vim.deep_equal(lines, { "main.py:1:print('needle')" }), "grep wrote %s", vim.inspect(lines))
  local result = vim.api.nvim_buf_get_var(ui.find_buffer("call/grep"), "toold_result")
  check(result.isError == false, "grep failed: %s", vim.inspect(result))
end)

test(":TooldCall without JSON asks for the required arguments", function()
  local original = vim.ui.input
  local prompts = {}
  vim.ui.input = function(opts, on_confirm)
    table.insert(prompts, opts.prompt)
    on_confirm("main.py")
  end
  vim.cmd("TooldCall read_file")
  vim.ui.input = original
  local ui = require("toold.ui")
  wait_for("the read_file result", function()
    return #ui.buffer_lines("call/read_file") > 0
  end)
  check(#prompts == 1 and prompts[1]:find("file_path"), "prompts: %s", vim.inspect(prompts))
  local lines = ui.buffer_lines("call/read_file")
  check(lines[1] == "1: print('needle')", "read_file wrote %s", vim.inspect(lines))
end)

test("a background job's jobs/finished notification reaches vim.notify", function()
  local result = toold.call("background_run", { command = "echo from-the-job" })
  check(not result.isError, "background_run failed: %s", vim.inspect(result))
  local job_id = result.content:match("background task (%S+)")
  check(job_id, "no job id in %s", result.content)
  wait_for("jobs/finished", function()
    return find_note("job " .. job_id) ~= nil
  end)
  local note = find_note("job " .. job_id)
  check(note.msg:find("`echo from-the-job` finished (exit 0)", 1, true), "notification: %s", note.msg)
  check(note.level == vim.log.levels.INFO, "level %s", tostring(note.level))

  vim.cmd("TooldJobs")
  local ui = require("toold.ui")
  local jobs = ui.buffer_lines("jobs")
  check(contains(jobs, "^" .. job_id .. "%s+done"), "jobs: %s", vim.inspect(jobs))
  local job = toold.request("jobs/get", { jobId = job_id })
  check(vim.trim(job.output) == "from-the-job", "output %s", job.output)
end)

test("a permission request answered Allow through vim.ui.select writes the file", function()
  selects = {}
  answer, answer_later = "Allow", false
  local args = { file_path = "allowed.txt", content = "hello" }
  local result = toold.call("write_file", args, { origin = "agent" })
  check(not result.isError, "write_file failed: %s", vim.inspect(result))
  check(read_file(ws .. "/allowed.txt") == "hello", "allowed.txt was not written")
  check(#selects == 1, "%d prompts", #selects)
  local items = selects[1].items
  check(vim.deep_equal(items, { "Allow", "Always allow", "Deny" }), "items %s", vim.inspect(items))
  check(selects[1].prompt:find("write_file", 1, true), "prompt %s", selects[1].prompt)
end)

test("an asynchronous picker answering Deny refuses the call", function()
  answer, answer_later = "Deny", true
  local args = { file_path = "denied.txt", content = "no" }
  local result = toold.call("write_file", args, { origin = "agent" })
  check(result.isError and result.content == "User denied.", "result %s", vim.inspect(result))
  check(read_file(ws .. "/denied.txt") == nil, "denied.txt was written")
  answer_later = false
end)

test(":TooldUndo restores the file a tool wrote, byte for byte", function()
  local path = ws .. "/undo.txt"
  local f = io.open(path, "w")
  f:write("before\n")
  f:close()
  toold.call("read_file", { file_path = "undo.txt" })
  local result = toold.call("write_file", { file_path = "undo.txt", content = "after\n" })
  check(not result.isError, "write_file: %s", vim.inspect(result))
  check(read_file(path) == "after\n", "undo.txt was not written")
  notes = {}
  vim.cmd("TooldUndo")
  check(read_file(path) == "before\n", "undo.txt is %q", read_file(path))
  check(find_note("undid write_file %(user, .*%): restored undo%.txt"), "notes %s", vim.inspect(notes))
end)

test(":TooldUndo after an outside change asks, and Restore anyway restores", function()
  local path = ws .. "/undo.txt"
  toold.call("write_file", { file_path = "undo.txt", content = "by toold\n" })
  local f = io.open(path, "w")
  f:write("by hand\n")
  f:close()
  selects, answer, answer_later = {}, "Cancel", false
  vim.cmd("TooldUndo")
  check(#selects == 1, "%d prompts", #selects)
  check(vim.deep_equal(selects[1].items, { "Restore anyway", "Cancel" }), "items %s", vim.inspect(selects[1].items))
  check(selects[1].prompt:find("undo.txt changed outside toold", 1, true), "prompt %s", selects[1].prompt)
  check(read_file(path) == "by hand\n", "Cancel restored anyway")
  selects, answer = {}, "Restore anyway"
  vim.cmd("TooldUndo")
  check(read_file(path) == "before\n", "undo.txt is %q", read_file(path))
  answer = "Allow"
end)

test(":TooldCheckpoints lists newest first; <CR> shows the diff, r restores", function()
  toold.call("write_file", { file_path = "undo.txt", content = "third\n" })
  vim.cmd("TooldCheckpoints")
  local ui = require("toold.ui")
  local buf = ui.find_buffer("checkpoints")
  local lines = ui.buffer_lines("checkpoints")
  check(lines[1]:find("write_file%s+user%s+undo%.txt$"), "first line %s", vim.inspect(lines))
  check(contains(lines, "%(undone%)$"), "no undone checkpoint in %s", vim.inspect(lines))
  local id = lines[1]:match("^(%x+)")
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "x", false)
  local diff_buf = ui.find_buffer("checkpoint/" .. id)
  check(diff_buf ~= nil and vim.fn.bufwinid(diff_buf) ~= -1, "no diff split for %s", id)
  check(vim.api.nvim_buf_get_option(diff_buf, "filetype") == "diff", "filetype not diff")
  local diff = ui.buffer_lines("checkpoint/" .. id)
  check(contains(diff, "^%-before$") and contains(diff, "^%+third$"), "diff %s", vim.inspect(diff))
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.api.nvim_feedkeys("r", "x", false)
  check(read_file(ws .. "/undo.txt") == "before\n", "r did not restore: %q", read_file(ws .. "/undo.txt"))
  check(ui.buffer_lines("checkpoints")[1]:find("^%x+%s.*restore"), "list not refreshed")
end)

test("a permission prompt for an edit opens its diff in a split first", function()
  selects, answer, answer_later = {}, "Allow", false
  local args = { file_path = "previewed.txt", content = "previewed line\n" }
  local result = toold.call("write_file", args, { origin = "agent" })
  check(not result.isError, "write_file: %s", vim.inspect(result))
  check(#selects == 1, "%d prompts", #selects)
  local shown = selects[1].preview
  check(shown ~= nil, "no diff split was open while the prompt was asked")
  check(shown.filetype == "diff", "filetype %s", shown.filetype)
  check(contains(shown.lines, "^%+previewed line$"), "preview %s", vim.inspect(shown.lines))
  check(contains(shown.lines, "previewed%.txt"), "preview %s", vim.inspect(shown.lines))
  local preview = require("toold.ui").find_buffer("preview")
  check(vim.fn.bufwinid(preview) == -1, "the preview split stayed open after the answer")
end)

-- The agent's edits and what ruff (ruff server, started by toold's engine) says of them.
local function ruff_items(buf, ns)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf, { namespace = ns })) do
    if d.code == "F401" then
      table.insert(found, d)
    end
  end
  return found
end

local function quickfix_texts()
  local texts = {}
  for _, item in ipairs(vim.fn.getqflist()) do
    table.insert(texts, vim.fn.fnamemodify(vim.fn.bufname(item.bufnr), ":t") .. ":" .. item.lnum .. ":" .. item.col .. " " .. item.type .. " " .. item.text)
  end
  return texts
end

test("an agent's write shows its ruff diagnostic in the buffer through vim.diagnostic", function()
  local path = ws .. "/broken.py"
  local f = io.open(path, "w")
  f:write("print('fine')\n")
  f:close()
  vim.cmd("edit " .. path)
  local buf = vim.api.nvim_get_current_buf()
  local ns = require("toold.diagnostics").namespace
  selects, answer, answer_later = {}, "Allow", false
  -- The agent reads a file before it overwrites it.
  toold.call("read_file", { file_path = "broken.py" }, { origin = "agent" })
  local result = toold.call("write_file", { file_path = "broken.py", content = "import os\n" }, { origin = "agent" })
  check(not result.isError, "write_file: %s", vim.inspect(result))
  wait_for("ruff's F401 on broken.py", function()
    return #ruff_items(buf, ns) == 1
  end)
  local d = ruff_items(buf, ns)[1]
  check(d.lnum == 0 and d.col == 7, "at %d:%d", d.lnum, d.col)
  check(d.severity == vim.diagnostic.severity.WARN, "severity %s", tostring(d.severity))
  check(d.source:lower() == "toold: ruff", "source %s", d.source)
  check(d.message:find("`os` imported but unused", 1, true), "message %s", d.message)
  -- Only under toold's namespace: the user's own LSP clients keep theirs.
  local all = vim.diagnostic.get(buf)
  check(#all == #vim.diagnostic.get(buf, { namespace = ns }), "diagnostics outside the namespace: %s", vim.inspect(all))
end)

test(":TooldDiagnostics fills the quickfix list, files not loaded included", function()
  local result = toold.call("write_file", { file_path = "unloaded.py", content = "import sys\n" }, { origin = "agent" })
  check(not result.isError, "write_file: %s", vim.inspect(result))
  check(vim.fn.bufnr(ws .. "/unloaded.py") == -1, "unloaded.py has a buffer")
  vim.cmd("TooldDiagnostics")
  local texts = quickfix_texts()
  check(vim.fn.getqflist({ title = 1 }).title == "toold diagnostics", "title %s", vim.fn.getqflist({ title = 1 }).title)
  check(contains(texts, "broken%.py:1:8 W `os` imported but unused.*%[toold: [Rr]uff F401%]"), "quickfix %s", vim.inspect(texts))
  check(contains(texts, "unloaded%.py:1:8 W `sys` imported but unused.*%[toold: [Rr]uff F401%]"), "quickfix %s", vim.inspect(texts))
  check(find_note("toold: %d+ diagnostics in the quickfix list"), "notes %s", vim.inspect(notes))
  vim.cmd("cclose")
  -- One path: only that file's.
  vim.cmd("TooldDiagnostics unloaded.py")
  texts = quickfix_texts()
  check(#texts == 1 and texts[1]:find("^unloaded%.py:1:8"), "quickfix %s", vim.inspect(texts))
  vim.cmd("cclose")
end)

test("the fix clears the buffer's diagnostic", function()
  local buf = vim.fn.bufnr(ws .. "/broken.py")
  local ns = require("toold.diagnostics").namespace
  selects, answer, answer_later = {}, "Allow", false
  toold.call("read_file", { file_path = "broken.py" }, { origin = "agent" })
  local result = toold.call("write_file", { file_path = "broken.py", content = "import os\n\nprint(os.sep)\n" }, { origin = "agent" })
  check(not result.isError, "write_file: %s", vim.inspect(result))
  wait_for("broken.py's diagnostics to clear", function()
    return #vim.diagnostic.get(buf, { namespace = ns }) == 0
  end)
  vim.cmd("TooldDiagnostics broken.py")
  check(#vim.fn.getqflist() == 0, "quickfix %s", vim.inspect(quickfix_texts()))
  vim.cmd("bwipeout! " .. buf)
end)

test(":TooldTasks shows tasks with status and dependencies", function()
  local first = toold.call("task_create", { title = "design" }).content
  toold.call("task_create", { title = "build", depends_on = { first.id } })
  wait_for("tasks/changed", function()
    return #toold.state.tasks == 2
  end)
  vim.cmd("TooldTasks")
  local lines = require("toold.ui").buffer_lines("tasks")
  check(contains(lines, "design%s+pending %(ready%)"), "tasks: %s", vim.inspect(lines))
  check(contains(lines, "build%s+pending$"), "tasks: %s", vim.inspect(lines))
  local dependency = "depends on " .. first.id .. ": design %(pending%)"
  check(contains(lines, dependency), "tasks: %s", vim.inspect(lines))
end)

test("team/message notifications reach vim.notify", function()
  -- A teammate needs a model provider to write; the handler is driven directly.
  toold.handlers["team/message"](nil, {
    message = {
      id = "m1",
      from = "reviewer",
      to = "main",
      content = "LGTM",
      type = "response",
      timestamp = "t",
    },
  }, {})
  check(find_note("reviewer → main %(response%): LGTM"), "no team note")
end)

test(":TooldMode plan blocks the agent's writes", function()
  vim.cmd("TooldMode plan")
  check(find_note("permission mode is now plan"), "no mode note")
  local args = { file_path = "plan.txt", content = "x" }
  local result = toold.call("write_file", args, { origin = "agent" })
  check(result.isError and result.content:find("Plan mode"), "result %s", vim.inspect(result))
end)

test(":TooldRestart starts a fresh daemon (the permission mode is back to default)", function()
  local before = toold.start()
  vim.cmd("TooldRestart")
  check(find_note("toold: restarted"), "no restart note")
  check(toold.start() ~= before, "the same client survived the restart")
  selects, answer = {}, "Allow"
  local args = { file_path = "after-restart.txt", content = "again" }
  local result = toold.call("write_file", args, { origin = "agent" })
  check(not result.isError and #selects == 1, "result %s, %d prompts", vim.inspect(result), #selects)
end)

test(":TooldAsk streams the agent's tool calls into toold://agent, then its answer", function()
  -- The scripted model (tests/clients/test_neovim.py): read_file, write_file, then text.
  local ui = require("toold.ui")
  local snapshots = {}
  selects, answer, answer_later = {}, "Allow", false
  vim.cmd("TooldAsk what does main.py print?")
  local buf = ui.find_buffer("agent")
  check(buf ~= nil, "no toold://agent buffer")
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function()
      vim.schedule(function()
        table.insert(snapshots, table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
      end)
    end,
  })
  check(vim.api.nvim_buf_get_option(buf, "filetype") == "markdown", "filetype is not markdown")
  check(vim.fn.maparg("<C-c>", "n", false, true).buffer == 1, "no buffer-local <C-c>")
  wait_for("the agent's answer", function()
    return contains(ui.buffer_lines("agent"), "^_done_$")
  end, 30000)
  local lines = ui.buffer_lines("agent")
  check(lines[3] == "> what does main.py print?", "prompt line %s", vim.inspect(lines))
  check(contains(lines, "^%- `read_file: {'file_path': 'main.py'}`$"), "lines %s", vim.inspect(lines))
  check(contains(lines, "^%- `write_file: "), "no write_file line: %s", vim.inspect(lines))
  check(contains(lines, "^## Answer$") and contains(lines, "^It prints %*%*needle%*%*%.$"),
    "answer missing: %s", vim.inspect(lines))
  -- Streamed: the tool call was on screen before the answer was.
  local streamed = false
  for _, text in ipairs(snapshots) do
    if text:find("read_file: ", 1, true) and not text:find("## Answer", 1, true) then
      streamed = true
    end
  end
  check(streamed, "tool calls were not shown before the answer: %s", vim.inspect(snapshots))
  -- The agent's write asked permission through vim.ui.select, answered Allow.
  check(#selects == 1 and selects[1].prompt:find("write_file", 1, true), "prompts %s", vim.inspect(selects))
  check(read_file(ws .. "/notes.md") == "from the agent", "notes.md was not written")
end)

test("a teammate's team_send to main reaches vim.notify as team/message", function()
  toold.call("team_register", { name = "alice", role = "dev" })
  local spawned = toold.call("team_spawn", { name = "alice" })
  check(not spawned.isError, "team_spawn: %s", vim.inspect(spawned))
  local sent = toold.call("team_send", { to_agent = "alice", content = "say hi to main" })
  check(sent.content == "Reply from alice: said hi", "team_send: %s", vim.inspect(sent))
  wait_for("team/message", function()
    return find_note("alice → main %(message%): hello from alice") ~= nil
  end)
end)

test(":TooldCancel stops a running :TooldAsk", function()
  local ui = require("toold.ui")
  vim.cmd("TooldAsk look around")
  -- The model asks for glob, then holds its next answer: the agent is mid-run.
  wait_for("the glob call", function()
    return contains(ui.buffer_lines("agent"), "^%- `glob: ")
  end, 30000)
  check(not require("toold.agent").current.done, "the agent finished early")
  vim.cmd("TooldCancel")
  wait_for("the cancelled agent", function()
    return contains(ui.buffer_lines("agent"), "^_cancelled_$")
  end)
  check(find_note("the agent was cancelled"), "no cancel note")
  vim.cmd("TooldCancel")
  check(find_note("no agent is running"), "a second cancel did not say so")
end)

test(":TooldAsk without an API key says how to set one", function()
  toold.stop(10000)
  toold.setup({ cmd = cmd, root_dir = ws, config = { agent = { api_key_env = "TOOLD_TEST_NO_KEY" } } })
  local original = vim.ui.input
  vim.ui.input = function(_, on_confirm)
    on_confirm("hello?")
  end
  vim.cmd("TooldAsk")
  vim.ui.input = original
  wait_for("the no-key message", function()
    return find_note("has no API key") ~= nil
  end)
  local note = find_note("has no API key")
  check(note.level == vim.log.levels.ERROR, "level %s", tostring(note.level))
  check(note.msg:find("Set TOOLD_TEST_NO_KEY in the environment Neovim starts toold with", 1, true),
    "note: %s", note.msg)
  check(note.msg:find(":TooldRestart", 1, true), "note: %s", note.msg)
  local lines = require("toold.ui").buffer_lines("agent")
  check(contains(lines, "^_failed: no API key_$"), "lines %s", vim.inspect(lines))
end)

local client = vim.lsp.get_client_by_id(toold.start())
toold.stop(10000)
test("the daemon stops on :TooldStop / stop()", function()
  check(client == nil or client:is_stopped(), "the daemon is still running")
end)
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  results.failed = results.failed + 1
  out("not ok - the test script itself: " .. tostring(err))
  pcall(toold.stop, 5000)
end

out(string.format("# %d passed, %d failed", results.passed, results.failed))
if results.failed > 0 then
  vim.cmd("cquit")
else
  vim.cmd("qall!")
end
