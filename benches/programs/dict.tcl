# A program shaped like a Tcl script keeping a table: a dict of 300,000 keys, each a list of
# a number and a string, walked, its keys upper-cased and sorted, then every other key
# removed. Run by `cargo xtask programs` (the `tcl` row); Tcl's own allocator cuts its
# objects and strings from large blocks it takes from `malloc`.
set table [dict create]
for {set i 0} {$i < 300000} {incr i} {
    dict set table key$i [list $i [string repeat x [expr {$i % 50}]]]
}
set names {}
dict for {key value} $table {
    lappend names [string toupper $key]
}
set names [lsort $names]
for {set i 0} {$i < 300000} {incr i 2} {
    dict unset table key$i
}
puts "[llength $names] [dict size $table] [lindex $names 0]"
