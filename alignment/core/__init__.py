"""The building blocks the loops and the evaluation run models with: policy (one adapter for our TransformerLM and
Hugging Face models; response log-probs), rollout (prompts -> completions), losses (the SFT, GRPO and DPO loss math as
pure tensor functions) and preference (DPO's summed log-probs of pairs and held-out preference accuracy)."""
