-- Text for toold's results, jobs, tasks and todos, and the scratch buffers showing them.
local M = {}

local BUFFER_PREFIX = "toold://"

--- A message to the user, titled toold (INFO unless ``level`` says otherwise).
function M.say(message, level)
  vim.notify(message, level or vim.log.levels.INFO, { title = "toold" })
end

--- JSON with two-space indentation (vim.json.encode has no pretty printer on 0.7).
function M.pretty_json(value, indent)
  indent = indent or ""
  local inner = indent .. "  "
  if value == vim.NIL or value == nil then
    return "null"
  end
  if type(value) ~= "table" then
    return vim.json.encode(value)
  end
  if vim.tbl_islist(value) and (next(value) ~= nil or getmetatable(value) == nil) then
    if next(value) == nil then
      return "[]"
    end
    local items = {}
    for _, item in ipairs(value) do
      table.insert(items, inner .. M.pretty_json(item, inner))
    end
    return "[\n" .. table.concat(items, ",\n") .. "\n" .. indent .. "]"
  end
  local keys = vim.tbl_keys(value)
  if #keys == 0 then
    return "{}"
  end
  table.sort(keys)
  local items = {}
  for _, key in ipairs(keys) do
    local name = vim.json.encode(tostring(key))
    table.insert(items, inner .. name .. ": " .. M.pretty_json(value[key], inner))
  end
  return "{\n" .. table.concat(items, ",\n") .. "\n" .. indent .. "}"
end

--- A tools/call result as buffer lines: strings as they are, lists of strings one per
--- line, anything else as JSON.
function M.result_lines(result)
  local content = result.content
  local text
  if type(content) == "string" then
    text = content
  elseif type(content) == "table" and vim.tbl_islist(content) and next(content) ~= nil then
    local all_strings = true
    for _, item in ipairs(content) do
      if type(item) ~= "string" then
        all_strings = false
      end
    end
    text = all_strings and table.concat(content, "\n") or M.pretty_json(content)
  else
    text = M.pretty_json(content)
  end
  return vim.split(text, "\n", { plain = true })
end

function M.tool_lines(tools)
  local lines = {}
  for _, tool in ipairs(tools) do
    local required = (tool.parameters and tool.parameters.required) or {}
    local summary = vim.split(tool.description or "", "\n", { plain = true })[1]
    table.insert(lines, string.format("%-18s %s", tool.name, summary))
    if #required > 0 then
      table.insert(lines, string.format("%-18s   requires: %s", "", table.concat(required, ", ")))
    end
  end
  return lines
end

function M.job_finished_text(event)
  local ok = event.status == "done"
  local what = ok and "finished" or event.status:gsub("_", " ")
  local exit = event.exitCode and string.format(" (exit %d)", event.exitCode) or ""
  local detail = (not ok and event.error) and (": " .. event.error) or ""
  return string.format("toold: job %s `%s` %s%s%s", event.jobId, event.command, what, exit, detail), ok
end

function M.job_lines(jobs)
  local lines = {}
  for _, job in ipairs(jobs) do
    local exit = job.exitCode and string.format(" exit %d", job.exitCode) or ""
    table.insert(lines, string.format("%s  %-9s%s  %s", job.jobId, job.status, exit, job.command))
  end
  if #lines == 0 then
    lines = { "No background jobs. Start one with :TooldBackground {command}." }
  end
  return lines
end

function M.job_detail_lines(job)
  local lines = {
    string.format("# job %s: %s", job.jobId, job.command),
    string.format("# status: %s%s", job.status, job.exitCode and (", exit " .. job.exitCode) or ""),
  }
  if job.error then
    table.insert(lines, "# error: " .. job.error)
  end
  table.insert(lines, "")
  vim.list_extend(lines, vim.split(job.output or job.result or "", "\n", { plain = true }))
  return lines
end

local STATUS_MARKS = { pending = "[ ]", in_progress = "[~]", done = "[x]", failed = "[!]" }

function M.task_lines(tasks)
  local by_id = {}
  for _, task in ipairs(tasks) do
    by_id[task.id] = task
  end
  local lines = {}
  for _, task in ipairs(tasks) do
    local ready = task.ready and " (ready)" or ""
    local mark = STATUS_MARKS[task.status] or "[?]"
    table.insert(lines, string.format("%s %s  %s  %s%s", mark, task.id, task.title, task.status, ready))
    for _, dep in ipairs(task.dependsOn or {}) do
      local other = by_id[dep]
      local label = other and string.format("%s (%s)", other.title, other.status) or "unknown task"
      table.insert(lines, string.format("      depends on %s: %s", dep, label))
    end
  end
  if #lines == 0 then
    lines = { "No tasks yet. The task_create tool adds them to .tasks.json." }
  end
  return lines
end

function M.todo_lines(todos)
  local lines = {}
  for _, todo in ipairs(todos) do
    local priority = (todo.priority and todo.priority ~= "normal") and (" !" .. todo.priority) or ""
    local mark = STATUS_MARKS[todo.status] or "[?]"
    table.insert(lines, string.format("%s %s  %s%s", mark, todo.id, todo.task, priority))
  end
  if #lines == 0 then
    lines = { "No TODOs. The agent's todo_write tool fills this list." }
  end
  return lines
end

-- -- scratch buffers -----------------------------------------------------------------

--- The buffer named toold://NAME, or nil.
function M.find_buffer(name)
  local full = BUFFER_PREFIX .. name
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_buf_get_name(buf) == full then
      return buf
    end
  end
  return nil
end

--- Lines of the buffer toold://NAME ({} when there is none).
function M.buffer_lines(name)
  local buf = M.find_buffer(name)
  return buf and vim.api.nvim_buf_get_lines(buf, 0, -1, false) or {}
end

local function set_lines(buf, lines)
  vim.api.nvim_buf_set_option(buf, "modifiable", true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.api.nvim_buf_set_option(buf, "modifiable", false)
  vim.api.nvim_buf_set_option(buf, "modified", false)
end

--- Show LINES in the scratch buffer toold://NAME, in a split unless it is visible.
function M.show(name, lines, filetype)
  local buf = M.find_buffer(name)
  if buf == nil then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, BUFFER_PREFIX .. name)
    vim.api.nvim_buf_set_option(buf, "bufhidden", "hide")
    vim.api.nvim_buf_set_option(buf, "filetype", filetype or "toold")
  end
  set_lines(buf, lines)
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
  end
  return buf
end

--- Update toold://NAME if it exists (for pushed lists), without opening it.
function M.refresh(name, lines)
  local buf = M.find_buffer(name)
  if buf ~= nil then
    set_lines(buf, lines)
  end
end

return M
