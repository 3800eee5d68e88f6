"""Using a trained model: generate (KV cache), speculative, quantize (int8), export (Hugging Face)."""
