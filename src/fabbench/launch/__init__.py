"""Starting ranks: on this host (the embedded launcher) or inside an already-launched job."""
