"""The session Flow's Steps, one module per group; ``AgentSessionFlow`` registers them all."""
