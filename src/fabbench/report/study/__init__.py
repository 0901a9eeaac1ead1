"""A study's views: what `fabbench report STUDY_DIR` and `fabbench compare STUDY_A STUDY_B`
make of a study directory (its manifest and cells' results files only, never a comm library).

cells         a study directory's cells with their runs
groups        cells grouped by question, ranked against the best, headlines
link_whatif   over emulated links: measured beside the scaling model's forecast
sites         two studies as two sites: the image they ran, their networks
answer        a study's whole answer (groups, forecast, what-if); answer_text, study_html and
              study_plots show it
study_compare study against study, cell by cell; compare_html shows it
study_report  the library calls behind `fabbench report STUDY_DIR`
"""
