-- toold for Neovim: one toold daemon per root folder, driven through Neovim's built-in
-- LSP client (vim.lsp.start_client), so it works from Neovim 0.7 on.
local ui = require("toold.ui")

local M = {}

local defaults = {
  -- Command that starts the daemon (a list, as for vim.lsp.start_client).
  cmd = { "toold", "serve" },
  -- Extra environment variables for the daemon (e.g. { ANTHROPIC_API_KEY = "..." } for
  -- :TooldAsk); by default it inherits Neovim's environment.
  env = nil,
  -- Workspace root; nil: the nearest folder above the cwd holding toold.toml, .toold
  -- or .git, else the cwd.
  root_dir = nil,
  -- toold.toml keys sent as initializationOptions.config (an unknown key is refused
  -- by the daemon with an error message naming it), e.g.
  -- { permissions = { mode = "auto" }, execution = { tool_runner = "subprocess" } }.
  config = nil,
  -- Ask for execution/event notifications (shown at DEBUG level).
  execution_events = false,
  -- Default timeout of request() and the synchronous commands, in milliseconds.
  timeout_ms = 30000,
  -- How long a permission prompt may wait for an answer (toold's own default is 120 s).
  ask_timeout_ms = 120000,
}

M.config = vim.deepcopy(defaults)

-- Latest lists pushed by the daemon (todos/changed, tasks/changed).
M.state = { todos = {}, tasks = {}, running_jobs = 0 }

local client_id = nil
local initialized = false
local init_error = nil

local ROOT_MARKERS = { "toold.toml", ".toold", ".git" }

local function exists(path)
  return vim.loop.fs_stat(path) ~= nil
end

--- The folder the daemon serves: config.root_dir, else the nearest marked parent of the cwd.
function M.root_dir()
  if M.config.root_dir then
    return (vim.fn.fnamemodify(M.config.root_dir, ":p"):gsub("/$", ""))
  end
  local cwd = vim.loop.cwd()
  local dir = cwd
  while dir and dir ~= "" do
    for _, marker in ipairs(ROOT_MARKERS) do
      if exists(dir .. "/" .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return cwd
end

-- Neovim 0.11 made client functions methods (client:request()); 0.7–0.10 use client.request().
local METHOD_CALLS = vim.fn.has("nvim-0.11") == 1

local function client_call(client, name, ...)
  if METHOD_CALLS then
    return client[name](client, ...)
  end
  return client[name](...)
end

--- An empty Lua table would be sent as a JSON array; toold wants objects.
local function as_object(value)
  if value == nil or (type(value) == "table" and next(value) == nil) then
    return vim.empty_dict()
  end
  return value
end

local function encode_params(params)
  params = as_object(params)
  if type(params) == "table" and params.arguments ~= nil then
    params.arguments = as_object(params.arguments)
  end
  return params
end

local function notify(message, level)
  vim.notify(message, level or vim.log.levels.INFO, { title = "toold" })
end

-- -- handlers -----------------------------------------------------------------------

local handlers = {}
M.handlers = handlers

--- window/showMessageRequest: toold's "Allow / Always allow / Deny" question, through
--- vim.ui.select. Waits for asynchronous pickers; no answer (or a dismissed one) is null.
handlers["window/showMessageRequest"] = function(_, params, _)
  local actions = (params and params.actions) or {}
  if #actions == 0 then
    notify(params.message)
    return vim.NIL
  end
  local titles = {}
  for _, action in ipairs(actions) do
    table.insert(titles, action.title)
  end
  local answered, choice = false, nil
  local preview = require("toold.checkpoints").take_preview()
  vim.ui.select(titles, { prompt = params.message, kind = "toold.permission" }, function(item)
    choice = item
    answered = true
  end)
  if not answered then
    vim.wait(M.config.ask_timeout_ms, function()
      return answered
    end, 20)
  end
  require("toold.checkpoints").close_preview(preview)
  for _, action in ipairs(actions) do
    if action.title == choice then
      return action
    end
  end
  return vim.NIL
end

handlers["jobs/finished"] = function(_, event, _)
  M.state.running_jobs = math.max(0, M.state.running_jobs - 1)
  pcall(M.commands.refresh_job_count)
  local text, ok = ui.job_finished_text(event)
  notify(text, ok and vim.log.levels.INFO or vim.log.levels.WARN)
  vim.cmd("doautocmd <nomodeline> User TooldJobFinished")
end

handlers["team/message"] = function(_, params, _)
  local msg = params.message or {}
  local from, to, kind = msg.from or "?", msg.to or "?", msg.type or "message"
  notify(string.format("toold: %s → %s (%s): %s", from, to, kind, msg.content or ""))
end

handlers["todos/changed"] = function(_, params, _)
  M.state.todos = params.todos or {}
  ui.refresh("todos", ui.todo_lines(M.state.todos))
  vim.cmd("doautocmd <nomodeline> User TooldTodosChanged")
end

handlers["tasks/changed"] = function(_, params, _)
  M.state.tasks = params.tasks or {}
  ui.refresh("tasks", ui.task_lines(M.state.tasks))
  vim.cmd("doautocmd <nomodeline> User TooldTasksChanged")
end

handlers["skills/changed"] = function() end

--- diagnostics/changed: a file's diagnostics after an edit toold saw, into vim.diagnostic.
handlers["diagnostics/changed"] = function(_, params, _)
  require("toold.diagnostics").on_changed(params)
end

--- $/progress: an agent/run started by :TooldAsk streams its tool calls; other tokens
--- go to Neovim's own handler.
handlers["$/progress"] = function(err, params, ctx, config)
  if require("toold.agent").on_progress(params) then
    return
  end
  local default = vim.lsp.handlers["$/progress"]
  if default ~= nil then
    return default(err, params, ctx, config)
  end
end

--- permissions/preview (we declare experimental.toold.diffPreview): the edit's unified
--- diff in a split, shown before the permission prompt that follows; closed once answered.
handlers["permissions/preview"] = function(_, params, _)
  require("toold.checkpoints").show_preview(params or {})
end

handlers["execution/event"] = function(_, e, _)
  local took = e.durationMs and string.format(" %.0f ms", e.durationMs) or ""
  notify(string.format("toold: %s %s [%s]%s", e.event, e.tool, e.runner, took), vim.log.levels.DEBUG)
end

-- -- the client ---------------------------------------------------------------------

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.window = caps.window or {}
  -- toold asks permission only from clients that declare this.
  caps.window.showMessage = caps.window.showMessage
    or { messageActionItem = { additionalPropertiesSupport = false } }
  -- An edit's permission prompt is preceded by permissions/preview (its diff in a split).
  caps.experimental = vim.tbl_extend("force", caps.experimental or {}, { toold = { diffPreview = true } })
  return caps
end

local function initialization_options(root)
  local options = { workspace = root }
  if M.config.config ~= nil then
    options.config = M.config.config
  end
  if M.config.execution_events then
    options.executionEvents = true
  end
  return options
end

--- Start the daemon (once); returns the client id.
function M.start()
  if client_id ~= nil then
    local client = vim.lsp.get_client_by_id(client_id)
    if client ~= nil and not client_call(client, "is_stopped") then
      return client_id
    end
  end
  local root = M.root_dir()
  initialized, init_error = false, nil
  local cmd = M.config.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    error(
      string.format(
        "toold: %q is not executable. Install toold with `pip install toold` "
          .. "(or `pip install -e <toold checkout>`), or pass cmd to require('toold').setup()",
        cmd[1]
      ),
      0
    )
  end
  local this_id
  this_id = vim.lsp.start_client({
    name = "toold",
    cmd = cmd,
    cmd_cwd = root,
    cmd_env = M.config.env,
    root_dir = root,
    init_options = initialization_options(root),
    capabilities = capabilities(),
    handlers = handlers,
    on_init = function()
      if client_id == this_id then
        initialized = true
      end
    end,
    on_exit = function(code, signal)
      if client_id ~= this_id then
        return -- a daemon we already stopped (e.g. before a restart)
      end
      if not initialized then
        init_error = string.format("the daemon exited during startup (code %s, signal %s)", code, signal)
      end
      vim.schedule(function()
        require("toold.agent").daemon_gone()
      end)
      initialized = false
      client_id = nil
    end,
  })
  if this_id == nil then
    error("toold: could not start " .. table.concat(cmd, " "), 0)
  end
  client_id = this_id
  return client_id
end

--- The initialized client, starting the daemon when needed (raises on failure).
function M.client(timeout_ms)
  local id = M.start()
  local ok = vim.wait(timeout_ms or M.config.timeout_ms, function()
    return initialized or init_error ~= nil
  end, 10)
  if init_error ~= nil or not ok then
    error("toold: " .. (init_error or "the daemon did not answer initialize"), 0)
  end
  return vim.lsp.get_client_by_id(id)
end

--- Stop the daemon (shutdown + exit); waits up to timeout_ms for it to go.
function M.stop(timeout_ms)
  if client_id == nil then
    return
  end
  local client = vim.lsp.get_client_by_id(client_id)
  client_id = nil
  if client ~= nil then
    client_call(client, "stop")
    vim.wait(timeout_ms or 5000, function()
      return client_call(client, "is_stopped")
    end, 20)
  end
  initialized = false
  require("toold.agent").daemon_gone()
  -- What a stopped daemon said may be stale now: the next one reports afresh.
  require("toold.diagnostics").reset()
end

--- Send one request and wait for it: returns the result, or nil and the error object
--- ({code, message, data}) the daemon answered; raises when there is no answer at all.
function M.try_request(method, params, timeout_ms)
  local client = M.client(timeout_ms)
  local timeout = timeout_ms or M.config.timeout_ms
  local response, reason = client_call(client, "request_sync", method, encode_params(params), timeout)
  if response == nil then
    error(string.format("toold: %s: %s", method, reason or "the daemon is not running"), 0)
  end
  if response.err ~= nil then
    local err = response.err
    if type(err) ~= "table" then
      err = { message = tostring(err) }
    end
    return nil, err
  end
  return response.result, nil
end

--- Send one request and wait for it: returns the result, raises with the error message.
function M.request(method, params, timeout_ms)
  local result, err = M.try_request(method, params, timeout_ms)
  if err ~= nil then
    error(string.format("toold: %s: %s", method, err.message), 0)
  end
  return result
end

--- Send one request; callback(err, result) runs when it is answered.
function M.request_async(method, params, callback)
  local client = M.client()
  client_call(client, "request", method, encode_params(params), function(err, result)
    callback(err, result)
  end)
end

--- Send one notification to the daemon.
function M.notify(method, params)
  client_call(M.client(), "notify", method, encode_params(params))
end

--- Run a tool as the user (synchronously); returns {content, isError, exitCode}.
function M.call(name, arguments, opts)
  opts = opts or {}
  return M.request(
    "tools/call",
    { name = name, arguments = arguments, origin = opts.origin or "user" },
    opts.timeout_ms
  )
end

--- The tool catalogue (native format).
function M.tools()
  return M.request("tools/list", { format = "native" }).tools
end

--- For a statusline: "toold" plus running jobs, "" when the daemon is not running.
function M.status()
  if not initialized then
    return ""
  end
  if M.state.running_jobs > 0 then
    return string.format("toold ⚙%d", M.state.running_jobs)
  end
  return "toold"
end

--- Configure the plugin; the daemon starts on first use.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if type(M.config.cmd) == "string" then
    M.config.cmd = { M.config.cmd, "serve" }
  end
  return M
end

M.commands = require("toold.commands")
M.agent = require("toold.agent")

return M
