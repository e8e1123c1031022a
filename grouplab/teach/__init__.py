"""Teaching: a run explained message by message (explain), in the languages of catalog/."""
