"""The app's own model of itself, streamlit-free: the lesson registry, the controls and the link rule, prose files."""
