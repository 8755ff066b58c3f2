"""``tierlab view``: heatmaps, histograms and drain intervals of a recording, per mapping
(live and simulated recordings alike)."""
