"""Analysis (pure): the hop ledger, kernel-state parsing, expectations and goldens."""
