"""Data parallelism: distributed (DDP, FSDP2 helpers), zero (ZeRO-1/2), parallel (one mode for the loop)."""
