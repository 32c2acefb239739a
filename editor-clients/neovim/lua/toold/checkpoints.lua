-- Checkpoints and undo (:TooldUndo, :TooldCheckpoints), and an edit's diff shown in a
-- split before its permission prompt (permissions/preview).
local ui = require("toold.ui")

local M = {}

local CONFLICT = -33003
local NOT_FOUND = -33002
M.RESTORE_ANYWAY = "Restore anyway"

local function toold()
  return require("toold")
end

local function say(message, level)
  require("toold.ui").say(message, level)
end

local function diff_lines(text)
  local lines = vim.split(text or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  return lines
end

-- -- the preview before a permission prompt ------------------------------------------

local pending = nil -- the preview buffer waiting for its prompt

--- permissions/preview: the unified diff in toold://preview (filetype diff), in a split;
--- the cursor stays where it was.
function M.show_preview(params)
  local lines = { string.format("# toold: %s wants to change (%s)", params.tool or "?", params.reason or "") }
  vim.list_extend(lines, diff_lines(params.diff))
  local from = vim.api.nvim_get_current_win()
  pending = ui.show("preview", lines, "diff")
  if vim.api.nvim_win_is_valid(from) then
    vim.api.nvim_set_current_win(from)
  end
  vim.cmd("redraw")
end

--- The preview shown for the prompt now being asked (nil when none); it is taken once.
function M.take_preview()
  local buf = pending
  pending = nil
  return buf
end

--- Close the preview's window once its prompt is answered (the buffer stays, hidden).
function M.close_preview(buf)
  if buf == nil or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, true)
  end
end

-- -- checkpoints ---------------------------------------------------------------------

--- "2026-12-01T18:03:12.5+00:00" → "2026-12-01 18:03:12Z"
local function time_label(iso)
  return (iso or ""):sub(1, 19):gsub("T", " ") .. "Z"
end

--- checkpoints/list, newest first, one line each: id, time, tool, origin, paths, (undone).
function M.lines(checkpoints)
  local lines = {}
  for i = #checkpoints, 1, -1 do
    local c = checkpoints[i]
    local undone = c.undone and "  (undone)" or ""
    local paths = table.concat(c.paths or {}, ", ")
    table.insert(lines, string.format("%s  %s  %-12s %-5s  %s%s", c.id, time_label(c.time), c.tool, c.origin, paths, undone))
  end
  if #lines == 0 then
    lines = { "No checkpoints yet: every file a tool writes is recorded here before it changes." }
  end
  return lines
end

local function list()
  return toold().request("checkpoints/list", {}).checkpoints
end

local function refresh_view()
  ui.refresh("checkpoints", M.lines(list()))
end

--- Report a restore: the call undone and the files put back; reload buffers showing them.
local function restored(result)
  local undone = nil
  local checkpoints = list()
  for _, c in ipairs(checkpoints) do
    if c.id == result.checkpoint.restores then
      undone = c
    end
  end
  ui.refresh("checkpoints", M.lines(checkpoints))
  vim.cmd("checktime")
  local what = undone and string.format("%s (%s, %s)", undone.tool, undone.origin, time_label(undone.time))
    or ("checkpoint " .. tostring(result.checkpoint.restores))
  say(string.format("toold: undid %s: restored %s", what, table.concat(result.restored, ", ")))
end

--- checkpoints/restore (the last call when ID is nil). Files changed outside toold since:
--- vim.ui.select offers "Restore anyway", which repeats it with force.
function M.restore(id)
  local params = id and { id = id } or {}
  local result, err = toold().try_request("checkpoints/restore", params)
  if err == nil then
    return restored(result)
  end
  if err.code == NOT_FOUND then
    return say("toold: " .. err.message, vim.log.levels.WARN)
  end
  if err.code ~= CONFLICT then
    error("toold: checkpoints/restore: " .. err.message, 0)
  end
  local paths = (type(err.data) == "table" and err.data.paths) or {}
  local prompt = string.format(
    "toold: %s changed outside toold since; restoring loses those changes.",
    #paths > 0 and table.concat(paths, ", ") or "some files"
  )
  vim.ui.select({ M.RESTORE_ANYWAY, "Cancel" }, { prompt = prompt, kind = "toold.conflict" }, function(choice)
    if choice ~= M.RESTORE_ANYWAY then
      return
    end
    local ok, problem = pcall(function()
      params.force = true
      restored(toold().request("checkpoints/restore", params))
    end)
    if not ok then
      say(tostring(problem), vim.log.levels.ERROR)
    end
  end)
end

local function checkpoint_under_cursor()
  return vim.api.nvim_get_current_line():match("^(%x+)%s%s")
end

--- :TooldCheckpoints — newest first; <CR> shows the diff in a split, r restores.
function M.show()
  local buf = ui.show("checkpoints", M.lines(list()))
  local map = function(lhs, fn)
    vim.keymap.set("n", lhs, function()
      local ok, err = pcall(fn)
      if not ok then
        say(tostring(err), vim.log.levels.ERROR)
      end
    end, { buffer = buf, nowait = true, silent = true })
  end
  map("<CR>", function()
    local id = checkpoint_under_cursor()
    if id then
      local diff = toold().request("checkpoints/diff", { id = id }).diff
      local lines = diff ~= "" and diff_lines(diff) or { "# No difference: the files are as they were before this call." }
      ui.show("checkpoint/" .. id, lines, "diff")
    end
  end)
  map("r", function()
    local id = checkpoint_under_cursor()
    if id then
      M.restore(id)
    end
  end)
  map("R", refresh_view)
  return buf
end

return M
