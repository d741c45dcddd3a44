"""A small DFlash-style speculative-decoding drafter trainer: the pipeline whose launch dfdoctor diagnoses."""
