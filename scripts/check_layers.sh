#!/usr/bin/env bash
# Arrows point down: the engine's lower layers never name the ones above them.
#
# - io/, format/, wal/, buffer/ and btree/ must not name `crate::sched` or `crate::db`
#   (thread-local facts about workers are asked of `crate::worker_context` instead);
# - buffer/ must not name `crate::wal` either (the log's rule reaches the pool through the
#   `buffer::WriteAhead` trait, which the log implements).
#
# Caught: paths (`crate::db::…`, `$crate::db`), escapes through `super::` chains
# (`super::super::sched`), and grouped imports (`use crate::{db, …}`, over several lines too).
# Comments and string literals are ignored. Prints every violation as file:line and exits 1 if there is one.
#
# Usage: scripts/check_layers.sh [source root]   (default: crates/ferrite/src)
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:-crates/ferrite/src}"

check() {
    local forbidden="$1"
    shift
    local dir failed=0
    for dir in "$@"; do
        [[ -d "$src/$dir" ]] || continue
        find "$src/$dir" -name '*.rs' -print0 | sort -z |
            xargs -0 -r perl -e '
                my $forbidden = shift @ARGV;
                my $found = 0;
                for my $file (@ARGV) {
                    open(my $fh, "<", $file) or die "$file: $!";
                    my @lines = <$fh>;
                    close $fh;
                    # Drop comments (a `//` outside a string literal) and the contents of string
                    # literals; keep line numbers.
                    my $in_str = 0; # strings may span lines
                    for (@lines) {
                        chomp;
                        my $out = "";
                        for (my $i = 0; $i < length; $i++) {
                            my $c = substr($_, $i, 1);
                            if ($in_str) {
                                # String contents are blanked: text, not paths.
                                if ($c eq "\\") { $out .= "  "; $i++; next }
                                if ($c eq "\"") { $in_str = 0 } else { $out .= " "; next }
                            } elsif (substr($_, $i, 3) eq "\x27\"\x27") {
                                $i += 2; # the character literal of a double quote
                                next;
                            } elsif ($c eq "\"") {
                                $in_str = 1;
                            } elsif (substr($_, $i, 2) eq "//") {
                                last;
                            }
                            $out .= $c;
                        }
                        $_ = $out;
                    }
                    my $text = join("\n", @lines);
                    my $report = sub {
                        my ($at, $what) = @_;
                        my $line = 1 + (substr($text, 0, $at) =~ tr/\n//);
                        print "$file:$line: names $what\n";
                        $found = 1;
                    };
                    # crate::X and super::...::X paths.
                    while ($text =~ /(?<![\w])((?:\$?crate|(?:super::)*super)::(?:self::)?($forbidden))\b/g) {
                        $report->($-[1], $1);
                    }
                    # Grouped imports: use crate::{ a, X::b, c::{...} } at any nesting of
                    # crate-level groups.
                    while ($text =~ /\b(?:\$?crate|(?:super::)*super)::\{/g) {
                        my ($depth, $pos, $item_start) = (1, pos($text), 1);
                        while ($depth > 0 && $pos < length($text)) {
                            my $c = substr($text, $pos, 1);
                            if ($c eq "{") { $depth++ }
                            elsif ($c eq "}") { $depth-- }
                            elsif ($c eq "," && $depth == 1) { $item_start = 1; $pos++; next }
                            elsif ($item_start && $depth == 1 && $c =~ /\w/) {
                                $item_start = 0;
                                my $rest = substr($text, $pos);
                                if ($rest =~ /^($forbidden)\b/) {
                                    $report->($pos, "crate::{$1}");
                                }
                            }
                            $pos++;
                        }
                    }
                }
                exit $found;
            ' "$forbidden" || failed=1
    done
    return $failed
}

status=0
check 'sched|db' io format wal buffer btree || status=1
check 'wal' buffer || status=1
if [[ $status != 0 ]]; then
    echo "error: a lower layer names a higher one (see scripts/check_layers.sh)" >&2
fi
exit $status
