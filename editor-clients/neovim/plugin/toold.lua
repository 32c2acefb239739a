-- :Toold* commands. The daemon starts on first use; configure it with
-- require("toold").setup({ cmd = ..., root_dir = ..., config = ... }).
if vim.g.loaded_toold then
  return
end
vim.g.loaded_toold = true

local function command(name, opts)
  vim.api.nvim_create_user_command(name, function(args)
    require("toold.commands")[name](args)
  end, opts)
end

command("TooldTools", { desc = "toold: list the tools" })
command("TooldCall", {
  nargs = "+",
  desc = "toold: run a tool — :TooldCall {tool} [{json arguments}]",
  complete = function(lead, line)
    return require("toold.commands").complete_tools(lead, line)
  end,
})
command("TooldJobs", { desc = "toold: background jobs (<CR> output, x cancel, r refresh)" })
command("TooldTasks", { desc = "toold: persistent tasks with their dependencies" })
command("TooldTodos", { desc = "toold: the session's TODO list" })
command("TooldBackground", { nargs = "+", desc = "toold: background_run a shell command" })
command("TooldMode", {
  nargs = 1,
  desc = "toold: set the permission mode",
  complete = function()
    return { "default", "auto", "plan", "bypass" }
  end,
})
command("TooldAsk", {
  nargs = "*",
  desc = "toold: ask the agent — :TooldAsk [{prompt}] (tool calls stream into toold://agent)",
})
command("TooldCancel", { desc = "toold: cancel the running :TooldAsk" })
command("TooldUndo", { desc = "toold: undo the last file change a tool made (checkpoints/restore)" })
command("TooldCheckpoints", { desc = "toold: checkpoints, newest first (<CR> diff, r restore, R refresh)" })
command("TooldDiagnostics", {
  nargs = "?",
  complete = "file",
  desc = "toold: the language servers' diagnostics (diagnostics/get) in the quickfix list — :TooldDiagnostics [{path}]",
})
command("TooldRestart", { desc = "toold: restart the daemon" })
command("TooldStop", { desc = "toold: stop the daemon" })

-- A file opened after the agent's edit shows what toold's language servers said about it.
vim.api.nvim_create_autocmd("BufReadPost", {
  group = vim.api.nvim_create_augroup("toold_diagnostics", { clear = true }),
  callback = function(args)
    if package.loaded["toold.diagnostics"] ~= nil then
      require("toold.diagnostics").on_buffer_read(args.buf)
    end
  end,
})
