"""The Kubernetes API as fabbench uses it from inside a pod: node labels and conditions from a
floors verdict (the chart's health check, `fabbench floors label-nodes`). Rendering manifests is
fabbench.render's; this package talks to a live API server."""
