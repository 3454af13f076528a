"""Compare submissions between partners: what differs, by how much, and why.

``load_input`` reads a submission tree (this workflow's, or a published MLCommons results
tree in the v5.x or v6.0 layout, or a tarball of either, extracted safely) into result
records; ``compare`` pairs them with the reference's and ranks the differences in their
settings that can explain a gap; ``render`` writes Markdown, CSV and a self-contained HTML
page.
"""
