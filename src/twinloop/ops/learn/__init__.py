"""Learn: heat-load forecasts for precooling, and feedback that adapts thresholds and policy choices."""
