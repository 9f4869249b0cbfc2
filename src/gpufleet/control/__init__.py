"""The live control plane: store, reconciler, executors, auth and accounting (design 0010)."""
