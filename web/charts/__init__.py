"""Pure figure builders: stored views in, plotly figure dicts out."""
