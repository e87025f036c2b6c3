# A program shaped like a text report: count the words of a file in a hash, keep the long
# lines, sort the words by count, build strings and a second hash of arrays.
# Run by `cargo xtask programs` (the `perl` row) with the generated text as its argument.
use strict;
use warnings;

my (%count, @long);
open(my $in, '<', $ARGV[0]) or die "$ARGV[0]: $!";
while (my $line = <$in>) {
    chomp $line;
    $count{$_}++ for split / /, $line;
    push @long, $line if length($line) > 60;
}
my @words = sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count;
my $joined = join(",", @long[0 .. 10000]);
my %info;
$info{$_ . "x"} = [ $count{$_}, length $_ ] for @words;
print scalar(@words), " ", length($joined), " ", scalar(keys %info), "\n";
