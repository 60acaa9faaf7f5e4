# tests/failure_lines.sh: sourced by tests/run.sh and scripts/test.sh.
# failure_lines LOG [N]: the few lines of a failed test's log that say why,
# for the summary that ends a run (scripts/test.sh): the first N (default
# 4) lines that report a failure, after the last step the test logged
# before them (lib.sh's log: "[HH:MM:SS.ss] ...", which says what it was
# doing and when); else the log's last N lines. Each line is cut to 200
# characters, so that a summary of many failures stays short.
# A line that reports a failure: lib.sh's "FAIL [test]: ..." (and "FAIL
# (continuing)"), a unit check's "file.c:LINE: ..." (tests/unit/unit.h),
# a sanitizer's or libFuzzer's report (with where libFuzzer wrote the
# input, and the input itself when it is short), a crash (lib.sh's cleanup).
FAILURE_LINE_RE='^FAIL|^[^ ]+\.c:[0-9]+: |ERROR: (Address|Leak|Thread|Memory|UndefinedBehavior)Sanitizer|runtime error:|ERROR: libFuzzer|^SUMMARY: |Test unit written to|^Base64: |crashed: signal|Assertion .* failed'

failure_lines() {
	local log=$1 n=${2:-4} lines
	# (The pattern through ENVIRON: awk -v would take its \. as an escape.)
	lines=$(FAILURE_LINE_RE=$FAILURE_LINE_RE awk -v n="$n" '
	    $0 ~ ENVIRON["FAILURE_LINE_RE"] {
		if (found == 0 && step != "")
			print step
		print
		if (++found >= n)
			exit
		next
	    }
	    found == 0 && /^\[[0-9][0-9]:[0-9][0-9]:[0-9][0-9]/ { step = $0 }
	' "$log" 2>/dev/null)
	[ -n "$lines" ] || lines=$(tail -n "$n" "$log" 2>/dev/null)
	[ -n "$lines" ] || lines="(its log is empty)"
	printf '%s\n' "$lines" | cut -c1-200
}
