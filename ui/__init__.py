"""The UI layer: what the pages share, one job per module (streamlit only here and in pages/).

- frame.py         the frame's typed hand-over to the page, and the legacy-pages workaround
- presentation.py  the lesson's steps and presentation mode (one step at a time)
- widgets.py       predict-then-reveal, prose, code boxes, number tables, link-bound choices
- draw.py          the one way a chart reaches the page (`draw`) and the heatmap helpers
- cache.py         the one cached call for every lesson (`computed`), the model and training runs
- hardening.py     one client's "clear cache" message must not reset everyone's caches
"""
