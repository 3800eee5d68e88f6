"""What the training loop (``model.train``) is made of: train_config, optim, data, checkpoint, progress, profiling."""
