"""Teams: registered teammates, JSONL mailboxes, and teammates running as background agents."""
