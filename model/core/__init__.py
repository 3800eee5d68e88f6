"""The model's math: config (sizes, presets, param/FLOP counts), layers, moe, transformer, loss, kernel_choice."""
