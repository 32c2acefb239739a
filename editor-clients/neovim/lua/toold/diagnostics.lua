-- What the agent's edits broke: the diagnostics toold's language servers (ruff, ty,
-- pyright, typescript-language-server, ...) report after a tool's write. diagnostics/changed
-- goes into vim.diagnostic under a namespace of its own, for loaded buffers (and for a
-- file's buffer loaded later); :TooldDiagnostics asks diagnostics/get and fills the
-- quickfix list, files not loaded included.
local M = {}

--- vim.diagnostic's namespace for toold's diagnostics (apart from your own LSP clients').
M.namespace = vim.api.nvim_create_namespace("toold")

-- Absolute path -> the file's wire diagnostics, as the last diagnostics/changed said.
-- Kept so that a buffer opened after the change shows them too.
local latest = {}

local SEVERITY = {
  error = vim.diagnostic.severity.ERROR,
  warning = vim.diagnostic.severity.WARN,
  information = vim.diagnostic.severity.INFO,
  hint = vim.diagnostic.severity.HINT,
}

local QF_TYPE = { error = "E", warning = "W", information = "I", hint = "N" }

local function text(value)
  return type(value) == "string" and value or nil
end

--- "toold: Ruff": the server's own name, marked as coming from toold (not your own LSP).
function M.source(diagnostic)
  return "toold: " .. (text(diagnostic.source) or "language server")
end

--- The wire path (relative to the workspace root) as an absolute path.
function M.absolute(path)
  if path:sub(1, 1) == "/" then
    return path
  end
  return require("toold").root_dir() .. "/" .. path
end

--- The loaded buffer showing PATH (absolute), or nil.
local function loaded_buffer(path)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_name(buf) == path then
      return buf
    end
  end
  return nil
end

--- The byte column of a UTF-16 column (LSP counts UTF-16 code units, Neovim bytes).
local function byte_column(buf, lnum, utf16)
  local line = vim.api.nvim_buf_get_lines(buf, lnum, lnum + 1, false)[1]
  if line == nil then
    return utf16
  end
  local ok, col = pcall(vim.str_byteindex, line, utf16, true)
  return ok and col or #line
end

--- Wire diagnostics as vim.diagnostic items of BUF (0-based line and byte column).
function M.for_buffer(buf, diagnostics)
  local items = {}
  for _, d in ipairs(diagnostics) do
    local lnum = math.max(0, d.line - 1)
    local col = byte_column(buf, lnum, math.max(0, d.column - 1))
    table.insert(items, {
      lnum = lnum,
      col = col,
      severity = SEVERITY[d.severity] or vim.diagnostic.severity.ERROR,
      message = d.message,
      source = M.source(d),
      code = text(d.code),
    })
  end
  return items
end

local function show(buf, diagnostics)
  vim.diagnostic.set(M.namespace, buf, M.for_buffer(buf, diagnostics))
end

--- diagnostics/changed {path, diagnostics}: all of one file's diagnostics now.
function M.on_changed(params)
  if type(params) ~= "table" or type(params.path) ~= "string" then
    return
  end
  local path = M.absolute(params.path)
  local diagnostics = params.diagnostics or {}
  latest[path] = #diagnostics > 0 and diagnostics or nil
  local buf = loaded_buffer(path)
  if buf ~= nil then
    show(buf, diagnostics)
  end
  vim.cmd("doautocmd <nomodeline> User TooldDiagnosticsChanged")
end

--- A buffer just read: show what toold last said about its file.
function M.on_buffer_read(buf)
  local diagnostics = latest[vim.api.nvim_buf_get_name(buf)]
  if diagnostics ~= nil then
    show(buf, diagnostics)
  end
end

--- Forget every toold diagnostic (the daemon stopped: they may be stale).
function M.reset()
  latest = {}
  vim.diagnostic.reset(M.namespace)
end

--- Quickfix items for wire diagnostics (1-based line; the column as the server gave it).
function M.quickfix_items(diagnostics)
  local items = {}
  for _, d in ipairs(diagnostics) do
    local code = text(d.code)
    local where = code and string.format("[%s %s]", M.source(d), code) or string.format("[%s]", M.source(d))
    table.insert(items, {
      filename = M.absolute(d.path),
      lnum = d.line,
      col = d.column,
      type = QF_TYPE[d.severity] or "E",
      -- One line per item: ruff's message goes on with "\n\nhelp: ...".
      text = (d.message:gsub("%s*\n%s*", " ")) .. " " .. where,
    })
  end
  return items
end

--- :TooldDiagnostics [path]: diagnostics/get (a file, a folder, or the workspace) into
--- the quickfix list; loaded buffers of those files get them as vim.diagnostic too.
function M.to_quickfix(path)
  local params = {}
  if path ~= nil and path ~= "" then
    params.path = path
  end
  local result = require("toold").request("diagnostics/get", params)
  local diagnostics = result.diagnostics or {}
  local by_file = {}
  for _, d in ipairs(diagnostics) do
    by_file[d.path] = by_file[d.path] or {}
    table.insert(by_file[d.path], d)
  end
  for file, list in pairs(by_file) do
    M.on_changed({ path = file, diagnostics = list })
  end
  vim.fn.setqflist({}, " ", { title = "toold diagnostics", items = M.quickfix_items(diagnostics) })
  local pending = result.pending or {}
  local message = string.format("toold: %d diagnostics in the quickfix list", #diagnostics)
  if #pending > 0 then
    message = message .. " (pending: " .. table.concat(pending, ", ") .. ")"
  end
  require("toold.ui").say(message)
  return result
end

return M
