"""Define-by-run mode: eager tensors and the tape."""
