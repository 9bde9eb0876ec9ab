# Sourced by the side-by-side benchmarks: `ticks PID` prints the CPU ticks (user + system, in
# units of `getconf CLK_TCK`) of process PID and its children, from /proc/PID/stat.
ticks() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' /proc/$p/stat)))
  done
  echo $total
}
