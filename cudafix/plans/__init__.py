"""What to change: the hook's cached plan, the activation plan, remedies (package changes)."""
