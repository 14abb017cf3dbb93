"""The web app's JSON API: one router module per screen (floor, jobs, incidents, planner, live, ...)."""
