-- The :Toold* commands (defined in plugin/toold.lua).
local ui = require("toold.ui")

local M = {}

local function toold()
  return require("toold")
end

local function say(message, level)
  require("toold.ui").say(message, level)
end

local function report(err)
  say(tostring(err), vim.log.levels.ERROR)
end

--- Run FN, turning a raised error into an error notification.
local function guarded(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then
      report(err)
    end
  end
end

local function find_tool(name)
  for _, tool in ipairs(toold().tools()) do
    if tool.name == name or vim.tbl_contains(tool.aliases or {}, name) then
      return tool
    end
  end
  return nil
end

--- Ask for a tool's required arguments one by one (vim.ui.input), then call DONE(args).
local function prompt_arguments(tool, done)
  local params = tool.parameters or {}
  local required = params.required or {}
  local properties = params.properties or {}
  local args = {}
  local function ask(i)
    local name = required[i]
    if name == nil then
      return done(args)
    end
    local schema = properties[name] or {}
    local kind = schema.type or "string"
    local prompt = string.format("%s %s (%s): ", tool.name, name, schema.description or kind)
    vim.ui.input({ prompt = prompt }, function(text)
      if text == nil then
        return
      end
      if kind == "integer" or kind == "number" then
        args[name] = tonumber(text)
      elseif kind == "boolean" then
        args[name] = text == "true"
      elseif kind == "string" then
        args[name] = text
      else
        args[name] = vim.json.decode(text)
      end
      ask(i + 1)
    end)
  end
  ask(1)
end

--- Run a tool as the user without blocking; the result opens in toold://call/NAME.
function M.call(name, args)
  vim.api.nvim_echo({ { "toold: running " .. name .. "…", "Comment" } }, false, {})
  local params = { name = name, arguments = args, origin = "user" }
  toold().request_async("tools/call", params, function(err, result)
    if err ~= nil then
      report(string.format("toold: %s: %s", name, err.message or vim.inspect(err)))
      return
    end
    local buf = ui.show("call/" .. name, ui.result_lines(result))
    vim.api.nvim_buf_set_var(buf, "toold_result", result)
    if result.isError then
      say("toold: " .. name .. " failed: " .. ui.result_lines(result)[1], vim.log.levels.ERROR)
    end
    if name == "background_run" then
      M.refresh_job_count()
    end
  end)
end

--- :TooldCall {name} [{json}]
M.TooldCall = guarded(function(opts)
  local name, json = opts.args:match("^(%S+)%s*(.*)$")
  if name == nil then
    error("usage: :TooldCall {tool} [{json arguments}]", 0)
  end
  if json ~= "" then
    local ok, args = pcall(vim.json.decode, json)
    if not ok or type(args) ~= "table" then
      error("toold: the arguments must be a JSON object: " .. tostring(args), 0)
    end
    return M.call(name, args)
  end
  local tool = find_tool(name)
  if tool == nil then
    error("toold: unknown tool " .. name, 0)
  end
  prompt_arguments(tool, function(args)
    M.call(tool.name, args)
  end)
end)

--- Completion of :TooldCall's tool name.
function M.complete_tools(lead, line)
  if line:match("^%S+%s+%S+%s") then
    return {}
  end
  local ok, tools = pcall(toold().tools)
  if not ok then
    return {}
  end
  local names = {}
  for _, tool in ipairs(tools) do
    if tool.name:sub(1, #lead) == lead then
      table.insert(names, tool.name)
    end
  end
  return names
end

M.TooldTools = guarded(function()
  ui.show("tools", ui.tool_lines(toold().tools()))
end)

function M.refresh_job_count()
  toold().request_async("jobs/list", {}, function(_, result)
    if result then
      local running = 0
      for _, job in ipairs(result.jobs) do
        if job.status == "running" then
          running = running + 1
        end
      end
      toold().state.running_jobs = running
    end
  end)
end

local function job_under_cursor()
  return vim.api.nvim_get_current_line():match("^(%S+)%s")
end

--- :TooldJobs — <CR> shows a job's output, x cancels it, r refreshes.
M.TooldJobs = guarded(function()
  local jobs = toold().request("jobs/list", {}).jobs
  local running = 0
  for _, job in ipairs(jobs) do
    if job.status == "running" then
      running = running + 1
    end
  end
  toold().state.running_jobs = running
  local buf = ui.show("jobs", ui.job_lines(jobs))
  local map = function(lhs, fn)
    vim.keymap.set("n", lhs, guarded(fn), { buffer = buf, nowait = true, silent = true })
  end
  map("<CR>", function()
    local id = job_under_cursor()
    if id then
      ui.show("job/" .. id, ui.job_detail_lines(toold().request("jobs/get", { jobId = id })), "log")
    end
  end)
  map("x", function()
    local id = job_under_cursor()
    if id then
      local job = toold().request("jobs/cancel", { jobId = id })
      say(string.format("toold: job %s is %s", job.jobId, job.status))
      M.TooldJobs()
    end
  end)
  map("r", function()
    M.TooldJobs()
  end)
end)

M.TooldTasks = guarded(function()
  local tasks = toold().request("tasks/list", {}).tasks
  toold().state.tasks = tasks
  ui.show("tasks", ui.task_lines(tasks))
end)

M.TooldTodos = guarded(function()
  local todos = toold().request("todos/list", {}).todos
  toold().state.todos = todos
  ui.show("todos", ui.todo_lines(todos))
end)

--- :TooldBackground {command}
M.TooldBackground = guarded(function(opts)
  M.call("background_run", { command = opts.args })
end)

--- :TooldMode {default|auto|plan|bypass}
M.TooldMode = guarded(function(opts)
  local mode = toold().request("permissions/setMode", { mode = opts.args }).mode
  say("toold: permission mode is now " .. mode)
end)

--- :TooldAsk [{prompt}] — without an argument the prompt is asked with vim.ui.input.
M.TooldAsk = guarded(function(opts)
  local prompt = vim.trim(opts.args or "")
  if prompt ~= "" then
    return require("toold.agent").ask(prompt)
  end
  vim.ui.input({ prompt = "Ask the toold agent: " }, function(text)
    if text ~= nil and vim.trim(text) ~= "" then
      local ok, err = pcall(require("toold.agent").ask, text)
      if not ok then
        report(err)
      end
    end
  end)
end)

--- :TooldCancel — stop the running :TooldAsk.
M.TooldCancel = guarded(function()
  require("toold.agent").cancel()
end)

--- :TooldUndo — put back what the last file-changing tool call wrote.
M.TooldUndo = guarded(function()
  require("toold.checkpoints").restore(nil)
end)

--- :TooldCheckpoints — <CR> diff, r restore, R refresh.
M.TooldCheckpoints = guarded(function()
  require("toold.checkpoints").show()
end)

--- :TooldDiagnostics [{path}] — diagnostics/get into the quickfix list (opened when not empty).
M.TooldDiagnostics = guarded(function(opts)
  require("toold.diagnostics").to_quickfix(opts.args)
  vim.cmd("botright cwindow")
end)

M.TooldRestart = guarded(function()
  toold().stop()
  toold().client()
  say("toold: restarted")
end)

M.TooldStop = guarded(function()
  toold().stop()
end)

return M
