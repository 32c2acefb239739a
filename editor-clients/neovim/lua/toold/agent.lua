-- :TooldAsk — the daemon's agent (agent/run) from Neovim: each tool call it makes is
-- a $/progress report streamed into the toold://agent scratch buffer (markdown); the
-- final text is appended there. <C-c> in that buffer or :TooldCancel cancels it.
local ui = require("toold.ui")

local M = {}

local BUFFER = "agent"

-- The running ask (one at a time): { token, buf, lines, done }.
M.current = nil

local counter = 0

local function toold()
  return require("toold")
end

local function notify(message, level)
  require("toold.ui").say(message, level)
end

-- Update the buffer without reopening a window the user closed; follow the end.
local function render(session)
  ui.refresh(BUFFER, session.lines)
  local win = vim.fn.bufwinid(session.buf)
  if win ~= -1 then
    vim.api.nvim_win_set_cursor(win, { #session.lines, 0 })
  end
end

local function add(session, lines)
  -- The status line stays last while the agent runs.
  local status = table.remove(session.lines)
  vim.list_extend(session.lines, lines)
  table.insert(session.lines, status)
  render(session)
end

local function finish(session, status, lines)
  session.done = true
  session.lines[#session.lines] = status
  if lines ~= nil then
    table.insert(session.lines, "")
    vim.list_extend(session.lines, lines)
  end
  render(session)
  if M.current == session then
    M.current = nil
  end
end

--- The fix for an agent that has no API key (agent/run's error data names the variable).
function M.no_key_message(err)
  local variable = type(err.data) == "table" and err.data.apiKeyEnv or "ANTHROPIC_API_KEY"
  return string.format(
    "toold: the agent has no API key. Set %s in the environment Neovim starts toold with "
      .. "(export it in the shell before starting nvim, or require('toold').setup({ env = { %s = ... } })), "
      .. "or name the variable holding your key in toold.toml ([agent] api_key_env); "
      .. "then :TooldRestart.",
    variable,
    variable
  )
end

--- $/progress for our tokens: a tool call (report) or the end; returns true when handled.
function M.on_progress(params)
  local session = M.current
  if session == nil or params == nil or params.token ~= session.token then
    return false
  end
  local value = params.value or {}
  if session.done then
    return true
  end
  if value.kind == "report" and value.message then
    add(session, { "- `" .. (value.message:gsub("\n", " ")) .. "`" })
  elseif value.kind == "end" and value.message == "cancelled" then
    -- Neovim drops the request's -32800 answer; the progress end says it stopped.
    finish(session, "_cancelled_")
    notify("toold: the agent was cancelled")
  end
  return true
end

--- Ask the agent PROMPT; the conversation shows in toold://agent.
function M.ask(prompt)
  if M.current ~= nil and not M.current.done then
    error("toold: the agent is still working on the last question; :TooldCancel stops it", 0)
  end
  counter = counter + 1
  local session = {
    token = string.format("toold-ask-%d-%d", vim.fn.getpid(), counter),
    done = false,
    lines = { "# toold agent", "" },
  }
  for _, line in ipairs(vim.split(prompt, "\n", { plain = true })) do
    table.insert(session.lines, "> " .. line)
  end
  vim.list_extend(session.lines, { "", "## Tool calls", "" })
  table.insert(session.lines, "_working… (<C-c> here or :TooldCancel stops it)_")
  M.current = session
  session.buf = ui.show(BUFFER, session.lines, "markdown")
  vim.api.nvim_buf_set_option(session.buf, "filetype", "markdown")
  vim.keymap.set("n", "<C-c>", function()
    M.cancel()
  end, { buffer = session.buf, nowait = true, silent = true, desc = "toold: cancel the agent" })
  render(session)
  local params = { prompt = prompt, workDoneToken = session.token }
  local ok, problem = pcall(toold().request_async, "agent/run", params, function(err, result)
    if session.done then
      return
    end
    if err ~= nil then
      if err.code == -32800 then
        finish(session, "_cancelled_")
        notify("toold: the agent was cancelled")
      elseif type(err.data) == "table" and err.data.apiKeyEnv then
        local message = M.no_key_message(err)
        finish(session, "_failed: no API key_", { message })
        notify(message, vim.log.levels.ERROR)
      else
        local message = "toold: agent/run failed: " .. (err.message or vim.inspect(err))
        finish(session, "_failed_", { message })
        notify(message, vim.log.levels.ERROR)
      end
      return
    end
    local answer = vim.split(result.text or "", "\n", { plain = true })
    table.insert(answer, 1, "## Answer")
    table.insert(answer, 2, "")
    finish(session, "_done_", answer)
  end)
  if not ok then
    -- The daemon could not start: nothing is running.
    finish(session, "_failed_", { tostring(problem) })
    error(problem, 0)
  end
  return session
end

--- The daemon exited: a running ask will never be answered.
function M.daemon_gone()
  local session = M.current
  if session ~= nil and not session.done then
    finish(session, "_failed: the daemon exited_")
  end
end

--- Cancel the running ask (window/workDoneProgress/cancel for its token).
function M.cancel()
  local session = M.current
  if session == nil or session.done then
    notify("toold: no agent is running")
    return false
  end
  toold().notify("window/workDoneProgress/cancel", { token = session.token })
  return true
end

return M
