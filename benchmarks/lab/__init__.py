"""Labs and fits that chose a setting (README.md says which, and where the page shows it). They
import the benchmarks and the harness; nothing imports them."""
