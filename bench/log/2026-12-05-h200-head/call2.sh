timeout 420 bash tests/sanitize.sh memcheck racecheck  # call 2, as run (inline), on the machine call 1 left warm
