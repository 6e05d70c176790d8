"""Training the bundled byte-level CWM: documents from the tracer, the model shapes, the loop,
checkpoints, export to a Hugging Face directory and the model card."""
