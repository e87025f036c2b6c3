//! A cached DWARF CFI unwinder for x86-64 Linux: the stack walk of [`crate::unwind`] when
//! every frame's rule is simple (the case for code from rustc and `gcc -O2`).
//!
//! A frame's unwind rule (where its canonical frame address, its return address and the
//! caller's `rbp` are) is computed once per return address, by reading the `.eh_frame`
//! of the object that holds it with `gimli` (the object found with `dl_iterate_phdr`,
//! the FDE through `.eh_frame_hdr`'s binary search table), and kept packed in one word of
//! a 64 KiB table ([`CACHE`]) keyed by the address. A frame seen before then costs a hash
//! probe, two loads to check the entry and one or two loads from the stack; libgcc's
//! `_Unwind_Backtrace` searches for the FDE and interprets its instructions on every
//! frame of every walk. Entries are checked against the loader's generation, which a
//! thread reads once every [`RECHECK`] walks, reading in between only memory of its own
//! stack ([`ThreadWalk`]); each thread also prefetches the entries its last walk used,
//! and a walk from the same registers as the thread's last, whose stack words are
//! unchanged, is not made again ([`Memo`]).
//!
//! A rule that needs more than `CFA = rsp|rbp + n`, `RA at CFA - n`, `rbp at CFA - n or
//! unchanged` (a DWARF expression: PLT stubs, signal frames, realigned stacks) is
//! [`Rule::UNSUPPORTED`], and the caller walks that stack with libgcc instead.
//!
//! Nothing here allocates: `gimli` reads the mapped sections in place, its unwind
//! context lives on the stack ([`Fixed`]), the cache is a static array.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Pointer, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// The registers a walk tracks.
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

impl Regs {
    /// The registers at this point of the function it is inlined into.
    #[inline(always)]
    pub fn here() -> Regs {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers; touches no memory.
        unsafe {
            core::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        Regs { ip, sp, bp }
    }
}

/// One frame's unwind rule, packed: bits 0..32 the CFA's offset from its base register,
/// 32..48 where the caller's `rbp` is saved (from the CFA), 48..56 where the return
/// address is (from the CFA), then flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Rule(u64);

impl Rule {
    const CFA_FROM_BP: u64 = 1 << 56;
    const BP_SAVED: u64 = 1 << 57;
    /// The walk ends here: no unwind information, or the return address is undefined
    /// (the outermost frame of a thread).
    const END: Rule = Rule(1 << 58);
    /// The rule is not one this unwinder follows.
    const UNSUPPORTED: Rule = Rule(1 << 59);

    fn new(cfa_from_bp: bool, cfa: i64, ra: i64, bp: Option<i64>) -> Rule {
        // Saved words below the CFA only (every compiler's): a walk then reads only below
        // the CFA it computed, which it checks.
        let (Ok(cfa), Ok(ra @ ..0)) = (i32::try_from(cfa), i8::try_from(ra)) else {
            return Rule::UNSUPPORTED;
        };
        let bp = match bp.map(i16::try_from) {
            Some(Ok(b @ ..0)) => Some(b),
            Some(_) => return Rule::UNSUPPORTED,
            None => None,
        };
        let mut w = cfa as u32 as u64 | (ra as u8 as u64) << 48;
        if cfa_from_bp {
            w |= Rule::CFA_FROM_BP;
        }
        if let Some(b) = bp {
            w |= Rule::BP_SAVED | (b as u16 as u64) << 32;
        }
        Rule(w)
    }

    fn cfa_offset(self) -> i64 {
        self.0 as u32 as i32 as i64
    }

    fn bp_offset(self) -> i64 {
        (self.0 >> 32) as u16 as i16 as i64
    }

    fn ra_offset(self) -> i64 {
        (self.0 >> 48) as u8 as i8 as i64
    }
}

/// Slots of the rule cache: two words each (64 KiB).
const CACHE_SLOTS: usize = 4096;

/// `[check, rule]` per slot; `check` is [`check`] of the address, the rule and the
/// [`generation`] it was computed in, so an entry torn by two threads writing the slot at
/// once, an empty one, or one from before a library was loaded or unloaded never
/// matches.
static CACHE: [[AtomicU64; 2]; CACHE_SLOTS] =
    [const { [AtomicU64::new(0), AtomicU64::new(0)] }; CACHE_SLOTS];

/// The slot of the cache that `addr`'s rule goes to.
fn slot_index(addr: u64) -> usize {
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % CACHE_SLOTS
}

/// Innermost frames of a thread's last walk whose cache slots its next walk prefetches.
const HINTS: usize = 16;

/// Walks a thread makes on the loader generation it last read before reading it again.
const RECHECK: u32 = 16;

/// The loader generation some thread read last: a thread whose own differs reads it again
/// at its next walk, so a `dlclose` that one thread noticed is noticed by all.
static LAST_GENERATION: AtomicU64 = AtomicU64::new(0);

/// What a thread keeps from one stack walk to its next (in `crate::tls::State`); all zero
/// at thread start, when it trusts nothing.
///
/// Reading the loader's generation ([`generation`]) costs a call of `dl_iterate_phdr`
/// under two locks, a sixth of a walk. A thread reads it once every [`RECHECK`] walks
/// (and when another thread saw it change); in between, a rule cached before a `dlclose`
/// could be taken for code loaded since at the same address. Such a walk must not read
/// outside the stack: it reads only inside `[sp, hi)`, where `sp` is its own starting
/// stack pointer and `[lo, hi)` (which holds `sp`) is memory of this stack that earlier
/// walks with a fresh generation read through, so one mapping, the thread's stack. A
/// read that would leave it makes the walk start again with a fresh generation; a walk
/// whose stack pointer is outside `[lo, hi)` (deeper than before, or on another stack: a
/// coroutine's, a signal stack) reads the generation first.
pub struct ThreadWalk {
    generation: Cell<u64>,
    /// Walks since `generation` was read.
    since: Cell<u32>,
    lo: Cell<u64>,
    hi: Cell<u64>,
    memo: Memo,
}

/// Reads of a walk a thread remembers ([`Memo`]): stacks that took up to this many are
/// recalled without a walk.
const MEMO: usize = 24;
const _: () = assert!(HINTS <= MEMO + 1);

/// The last walk of a thread, as the words of its stack it read. A walk is a function of
/// its starting registers, the rules (the generation) and those words, so a walk from the
/// same registers under the same generation that finds each of them unchanged finds the
/// same frames: [`Memo::recall`] checks them (a load and a compare per word) instead of
/// walking (per frame a cache probe that often misses, the rule's decoding and checks).
/// Samples repeat their call sites, and a site reached by the same path starts from the
/// same registers.
struct Memo {
    /// Whether the fields below describe a walk of this thread's.
    valid: Cell<bool>,
    /// Its starting `ip`, `sp` and `bp`, and its generation. The starting `bp` counts
    /// only if `needs_bp`: if a frame's CFA was computed from it (before any frame
    /// restored the caller's `rbp`); in code built without frame pointers it is some
    /// value of the caller's, different from one allocation to the next.
    start: [Cell<u64>; 3],
    needs_bp: Cell<bool>,
    generation: Cell<u64>,
    /// The words read (the return address, and where `bp_at` is not 0, the caller's
    /// `rbp` of each frame) and the frames found: the first `frames` return addresses.
    reads: Cell<u8>,
    frames: Cell<u8>,
    /// The number of the thread's walks so far: the identity of the last, which a
    /// recalled walk reports too (so a caller may reuse what it made of those frames).
    serial: Cell<u64>,
    ra_at: [Cell<u64>; MEMO],
    ra: [Cell<u64>; MEMO],
    bp_at: [Cell<u64>; MEMO],
    bp: [Cell<u64>; MEMO],
}

impl Memo {
    const fn new() -> Self {
        Memo {
            valid: Cell::new(false),
            start: [const { Cell::new(0) }; 3],
            needs_bp: Cell::new(false),
            generation: Cell::new(0),
            reads: Cell::new(0),
            frames: Cell::new(0),
            serial: Cell::new(0),
            ra_at: [const { Cell::new(0) }; MEMO],
            ra: [const { Cell::new(0) }; MEMO],
            bp_at: [const { Cell::new(0) }; MEMO],
            bp: [const { Cell::new(0) }; MEMO],
        }
    }

    /// Note the `k`th read of a walk: the return address `ra` at `ra_at`, and `bp` at
    /// `bp_at` unless that is 0.
    #[inline(always)]
    fn note(&self, k: usize, ra_at: u64, ra: u64, bp_at: u64, bp: u64) {
        if k < MEMO {
            self.ra_at[k].set(ra_at);
            self.ra[k].set(ra);
            self.bp_at[k].set(bp_at);
            self.bp[k].set(bp);
        }
    }

    /// After a walk from `regs` under `generation` that made `reads` reads (noted),
    /// found `frames` frames and used the starting `bp` if `needs_bp`.
    fn keep(&self, regs: Regs, generation: u64, reads: usize, frames: usize, needs_bp: bool) {
        self.valid.set(reads <= MEMO);
        self.serial.set(self.serial.get() + 1);
        self.needs_bp.set(needs_bp);
        for (s, v) in self.start.iter().zip([regs.ip, regs.sp, regs.bp]) {
            s.set(v);
        }
        self.generation.set(generation);
        self.reads.set(reads.min(MEMO) as u8);
        self.frames.set(frames.min(MEMO) as u8);
    }

    /// The frames of a walk from `regs` under `generation` into `out`, if the last walk
    /// started there and every word it read is unchanged; it reads words in
    /// `[regs.sp, bound)` only.
    fn recall(
        &self,
        regs: Regs,
        generation: u64,
        bound: u64,
        out: &mut [MaybeUninit<u64>],
    ) -> Option<usize> {
        let same = self.valid.get()
            && self.generation.get() == generation
            && self.start[0].get() == regs.ip
            && self.start[1].get() == regs.sp
            && (!self.needs_bp.get() || self.start[2].get() == regs.bp);
        let (reads, frames) = (
            (self.reads.get() as usize).min(MEMO),
            self.frames.get() as usize,
        );
        if !same || frames > out.len() {
            return None;
        }
        let span = bound.wrapping_sub(8).wrapping_sub(regs.sp);
        let unchanged = |at: u64, v: u64| {
            // SAFETY: a word of this thread's stack: at or above its stack pointer and
            // below `bound`, the top of memory of this stack that a walk read (see
            // `ThreadWalk`).
            at.wrapping_sub(regs.sp) <= span && unsafe { (at as *const u64).read_unaligned() } == v
        };
        // Indexed, not zipped iterators: this is the whole of a recalled walk, and the
        // iterator adapters cost a third more instructions.
        let mut k = 0;
        while k < reads {
            let (ra, bp_at) = (self.ra[k].get(), self.bp_at[k].get());
            if !unchanged(self.ra_at[k].get(), ra)
                || bp_at != 0 && !unchanged(bp_at, self.bp[k].get())
            {
                return None;
            }
            if k < frames {
                out[k].write(ra);
            }
            k += 1;
        }
        Some(frames)
    }
}

impl ThreadWalk {
    pub const fn new() -> Self {
        ThreadWalk {
            generation: Cell::new(0),
            since: Cell::new(0),
            lo: Cell::new(0),
            hi: Cell::new(0),
            memo: Memo::new(),
        }
    }

    /// Ask for the cache lines of the slots the last walk used for its [`HINTS`]
    /// innermost frames (its starting `ip` and the return addresses in its memo), all at
    /// once. Samples come a thousand allocations apart, long enough for the program to
    /// evict the cache, and a walk finds each frame's slot only after reading the frame
    /// before: without this, each frame of a walk waits for a miss of its own, one after
    /// the other. The same call sites sample again and again, so the lines asked for are
    /// mostly the ones the walk reads.
    fn prefetch(&self) {
        let m = &self.memo;
        let addrs = core::iter::once(m.start[0].get())
            .chain(m.ra[..HINTS - 1].iter().map(|ra| ra.get().wrapping_sub(1)));
        for addr in addrs {
            let line = &CACHE[slot_index(addr)] as *const _ as *const i8;
            // SAFETY: a prefetch reads nothing the program sees and cannot fault; the
            // address is inside `CACHE`.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line)
            };
        }
    }

    /// The generation a walk from `sp` may use without reading it, if any.
    fn trusted(&self, sp: u64) -> Option<u64> {
        let g = self.generation.get();
        let trusted = (self.lo.get()..self.hi.get()).contains(&sp)
            && self.since.get() < RECHECK
            && g == LAST_GENERATION.load(Relaxed);
        trusted.then(|| {
            self.since.set(self.since.get() + 1);
            g
        })
    }

    /// After a walk from `sp` with the fresh generation `g` that read the stack below `top`.
    fn learn(&self, g: u64, sp: u64, top: u64) {
        if (self.lo.get()..self.hi.get()).contains(&sp) {
            self.hi.set(self.hi.get().max(top));
        } else {
            self.lo.set(sp);
            self.hi.set(top);
        }
        self.generation.set(g);
        self.since.set(0);
        LAST_GENERATION.store(g, Relaxed);
    }
}

impl Default for ThreadWalk {
    fn default() -> Self {
        Self::new()
    }
}

fn check(addr: u64, rule: Rule, generation: u64) -> u64 {
    addr ^ rule.0.wrapping_mul(0xFF51_AFD7_ED55_8CCD)
        ^ generation.wrapping_mul(0xC4CE_B9FE_1A85_EC53)
        ^ 1
}

/// Which set of loaded objects the process has: the loader's counts of objects loaded
/// and unloaded so far (`dlpi_adds`, `dlpi_subs`, which glibc and musl keep), folded into
/// one number. After a `dlclose`, another object may be mapped where the closed one was,
/// with other rules at the same addresses: a walk asks for the generation first, and
/// cached rules of an earlier one no longer match.
fn generation() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        let has_counts = size
            >= core::mem::offset_of!(libc::dl_phdr_info, dlpi_subs)
                + core::mem::size_of::<libc::c_ulonglong>();
        if has_counts {
            // SAFETY: `info` is the loader's record, `size` bytes long (which covers both
            // counts), for this call; `data` is the `u64` below.
            unsafe {
                let info = &*info;
                *data.cast::<u64>() = info.dlpi_adds ^ info.dlpi_subs.rotate_left(32);
            }
        }
        1
    }
    let mut generation = 0u64;
    crate::unwind::LOADER.with(|()| {
        // SAFETY: `first` only reads the record it is given and writes `generation`,
        // which outlives the call; it stops the iteration at the first object.
        unsafe { libc::dl_iterate_phdr(Some(first), (&mut generation as *mut u64).cast()) };
    });
    generation
}

/// The rule of the frame executing at `addr` in `generation`: from the cache, or
/// computed and cached.
fn rule_at(addr: u64, index: usize, generation: u64) -> Rule {
    let s = &CACHE[index];
    let (k, r) = (s[0].load(Relaxed), Rule(s[1].load(Relaxed)));
    if k == check(addr, r, generation) {
        return r;
    }
    let r = compute(addr);
    s[1].store(r.0, Relaxed);
    s[0].store(check(addr, r, generation), Relaxed);
    r
}

/// Walk the stack from `regs` (the registers of the calling function, at the point
/// `regs.ip`), writing the return addresses of the frames above it to `out`, innermost
/// first: `out[..n]` written when it returns `Some((n, serial))`, where `serial`
/// identifies the frames among the thread's walks: two walks of a thread with the same
/// `serial` found the same frames (the second recalled the first). `None` when a frame's
/// rule is one this unwinder does not follow.
pub fn walk(regs: Regs, out: &mut [MaybeUninit<u64>]) -> Option<(usize, u64)> {
    crate::tls::with(|t| {
        let w = &t.walk;
        if let Some(g) = w.trusted(regs.sp) {
            if let Some(len) = w.memo.recall(regs, g, w.hi.get(), out) {
                return Some((len, w.memo.serial.get()));
            }
            w.prefetch();
            match walk_with(regs, out, g, w.hi.get(), w) {
                Walked::Frames(len, _) => return Some((len, w.memo.serial.get())),
                Walked::Unsupported => return None,
                // A rule from before a `dlclose`: again, with the loader's generation.
                Walked::OutOfBounds => {}
            }
        }
        w.prefetch();
        let g = generation();
        match walk_with(regs, out, g, u64::MAX, w) {
            Walked::Frames(len, top) => {
                w.learn(g, regs.sp, top);
                Some((len, w.memo.serial.get()))
            }
            Walked::Unsupported | Walked::OutOfBounds => None,
        }
    })
}

/// How [`walk_with`] ended.
enum Walked {
    /// `out[..n]` written; every word read lay below the second field.
    Frames(usize, u64),
    Unsupported,
    /// A rule placed a read outside `[regs.sp, bound)`.
    OutOfBounds,
}

/// [`walk`] with the rules of `generation`, reading the stack only inside
/// `[regs.sp, bound)`; the words read are noted in `w`'s memo.
#[inline(never)]
fn walk_with(
    regs: Regs,
    out: &mut [MaybeUninit<u64>],
    generation: u64,
    bound: u64,
    w: &ThreadWalk,
) -> Walked {
    w.memo.valid.set(false);
    let Regs {
        mut ip,
        mut sp,
        mut bp,
    } = regs;
    // A word at `at` may be read if `regs.sp <= at` and `at + 8 <= bound`: one compare.
    let (bottom, span) = (regs.sp, bound.wrapping_sub(8).wrapping_sub(regs.sp));
    let (mut len, mut reads) = (0, 0);
    let (mut bp_is_initial, mut needs_bp) = (true, false);
    // The first frame executes at `ip`; the others after a call, so their rule is that
    // of the call instruction (the return address may start another function's range).
    let mut addr = ip;
    while len < out.len() {
        let rule = rule_at(addr, slot_index(addr), generation);
        if rule.0 & (Rule::END.0 | Rule::UNSUPPORTED.0) != 0 {
            if rule == Rule::END {
                break;
            }
            return Walked::Unsupported;
        }
        let base = if rule.0 & Rule::CFA_FROM_BP != 0 {
            needs_bp |= bp_is_initial;
            bp
        } else {
            sp
        };
        let cfa = base.wrapping_add(rule.cfa_offset() as u64);
        // The caller's frame is above this one, and near: anything else means the rule
        // does not describe this stack, so stop rather than read far away.
        if cfa <= sp || cfa - sp > MAX_FRAME || cfa % 8 != 0 {
            break;
        }
        // Where the return address is saved: below the CFA ([`Rule::new`]), and inside
        // `[regs.sp, bound)` (checked).
        let ra_at = cfa.wrapping_add(rule.ra_offset() as u64);
        if ra_at.wrapping_sub(bottom) > span {
            return Walked::OutOfBounds;
        }
        // SAFETY: a word of this thread's stack from the walk's starting stack pointer
        // up: with rules of the current generation (`bound` is `u64::MAX`), inside the
        // frame the rule describes, below the frames that are still running (the walk is
        // in a callee of all of them); with any rule, below `bound`, the top of memory of
        // this same stack that such a walk read before (see `ThreadWalk`). Unaligned: a
        // rule's offsets need not be multiples of 8.
        ip = unsafe { (ra_at as *const u64).read_unaligned() };
        let mut bp_at = 0;
        if rule.0 & Rule::BP_SAVED != 0 {
            bp_at = cfa.wrapping_add(rule.bp_offset() as u64);
            if bp_at.wrapping_sub(bottom) > span {
                return Walked::OutOfBounds;
            }
            // SAFETY: as for the return address.
            bp = unsafe { (bp_at as *const u64).read_unaligned() };
            bp_is_initial = false;
        }
        w.memo.note(len, ra_at, ip, bp_at, bp);
        reads += 1;
        sp = cfa;
        if ip == 0 {
            break;
        }
        out[len].write(ip);
        len += 1;
        addr = ip - 1;
    }
    w.memo.keep(regs, generation, reads, len, needs_bp);
    // Every word read lay below the last CFA.
    Walked::Frames(len, sp)
}

/// Largest frame believed (bytes between a frame's stack pointer and its CFA).
const MAX_FRAME: u64 = 1 << 28;

/// A `gimli` unwind context of fixed size, kept on the stack.
struct Fixed;

impl UnwindContextStorage<usize> for Fixed {
    type Rules = [(gimli::Register, RegisterRule<usize>); 32];
    type Stack = [UnwindTableRow<usize, Self>; 4];
}

/// What [`compute`] asks of each loaded object.
struct Search {
    addr: u64,
    rule: Option<Rule>,
}

/// The rule of the frame executing at `addr`, from the `.eh_frame` of its object.
#[cold]
#[inline(never)]
fn compute(addr: u64) -> Rule {
    let mut search = Search { addr, rule: None };
    crate::unwind::LOADER.with(|()| {
        // SAFETY: `search` outlives the call; the callback reads only what the loader
        // passes.
        unsafe { libc::dl_iterate_phdr(Some(visit), (&mut search as *mut Search).cast()) };
    });
    search.rule.unwrap_or(Rule::END)
}

/// `dl_iterate_phdr`'s callback: the rule for `addr` if this object holds it.
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: `data` is the `Search` of `compute`; `info` the loader's description of
    // one loaded object, valid during the call (the object stays loaded until it ends).
    let (search, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
    let base = info.dlpi_addr;
    // SAFETY: the object's program headers, `dlpi_phnum` of them, mapped with it.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let segment_of = |a: u64| {
        phdrs.iter().find(|p| {
            p.p_type == libc::PT_LOAD
                && (base + p.p_vaddr..base + p.p_vaddr + p.p_memsz).contains(&a)
        })
    };
    if segment_of(search.addr).is_none() {
        return 0;
    }
    let rule = phdrs
        .iter()
        .find(|p| p.p_type == libc::PT_GNU_EH_FRAME)
        .map_or(Rule::END, |hdr| {
            let eh_frame_end = |a: u64| segment_of(a).map(|p| base + p.p_vaddr + p.p_memsz);
            // SAFETY: `.eh_frame_hdr` is mapped, `p_memsz` bytes from its address, and
            // `.eh_frame` up to the end of the segment that holds it, read only.
            unsafe { rule_from(search.addr, base + hdr.p_vaddr, hdr.p_memsz, eh_frame_end) }
        });
    search.rule = Some(rule);
    1
}

/// The rule for `addr` from the `.eh_frame_hdr` at `hdr_addr` (`hdr_len` bytes).
///
/// # Safety
/// `hdr_len` bytes at `hdr_addr` are mapped and readable, and so is `.eh_frame` from the
/// address the header names up to `eh_frame_end` of it; both stay mapped during the call.
unsafe fn rule_from(
    addr: u64,
    hdr_addr: u64,
    hdr_len: u64,
    eh_frame_end: impl Fn(u64) -> Option<u64>,
) -> Rule {
    // SAFETY: by the caller.
    let hdr = unsafe { core::slice::from_raw_parts(hdr_addr as *const u8, hdr_len as usize) };
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_addr);
    let Ok(parsed) = EhFrameHdr::new(hdr, NativeEndian).parse(&bases, 8) else {
        return Rule::UNSUPPORTED;
    };
    let Pointer::Direct(eh_frame_addr) = parsed.eh_frame_ptr() else {
        return Rule::UNSUPPORTED;
    };
    let (Some(end), Some(table)) = (eh_frame_end(eh_frame_addr), parsed.table()) else {
        return Rule::UNSUPPORTED;
    };
    // SAFETY: by the caller.
    let eh_frame = unsafe {
        core::slice::from_raw_parts(eh_frame_addr as *const u8, (end - eh_frame_addr) as usize)
    };
    let eh_frame = EhFrame::new(eh_frame, NativeEndian);
    let bases = bases.set_eh_frame(eh_frame_addr);
    let mut ctx = UnwindContext::<usize, Fixed>::new_in();
    match table.unwind_info_for_address(&eh_frame, &bases, &mut ctx, addr, EhFrame::cie_from_offset)
    {
        Ok(row) => rule_of(row),
        Err(gimli::Error::NoUnwindInfoForAddress) => Rule::END,
        Err(_) => Rule::UNSUPPORTED,
    }
}

/// The packed rule of an unwind table row, if it is of the simple kind.
fn rule_of(row: &UnwindTableRow<usize, Fixed>) -> Rule {
    let (from_bp, cfa) = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RSP => {
            (false, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RBP => {
            (true, offset)
        }
        _ => return Rule::UNSUPPORTED,
    };
    let ra = match row.register(X86_64::RA) {
        RegisterRule::Offset(n) => n,
        RegisterRule::Undefined => return Rule::END,
        _ => return Rule::UNSUPPORTED,
    };
    let bp = match row.register(X86_64::RBP) {
        RegisterRule::Offset(n) => Some(n),
        RegisterRule::Undefined | RegisterRule::SameValue => None,
        _ => return Rule::UNSUPPORTED,
    };
    Rule::new(from_bp, cfa, ra, bp)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Tests that walk or load libraries, one at a time: [`LAST_GENERATION`] and the
    /// loader's generation are the process's.
    pub(crate) static WALKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Run `f` in a new thread (whose [`ThreadWalk`] starts empty), alone among the
    /// tests that walk.
    fn in_new_thread(f: impl FnOnce() + Send + 'static) {
        let _one = WALKS.lock().unwrap();
        std::thread::spawn(f).join().unwrap();
    }

    /// Inlined, so that the walk's first return address is into its caller.
    #[inline(always)]
    fn walk_here(out: &mut [MaybeUninit<u64>]) -> Vec<u64> {
        walk_here_numbered(out).0
    }

    /// [`walk_here`], with the walk's serial number.
    #[inline(never)]
    fn walk_here_numbered(out: &mut [MaybeUninit<u64>]) -> (Vec<u64>, u64) {
        let (n, serial) = walk(Regs::here(), out).unwrap();
        // SAFETY: `walk` wrote `out[..n]`.
        let frames = out[..n]
            .iter()
            .map(|f| unsafe { f.assume_init() })
            .collect();
        core::hint::black_box(out);
        (frames, serial)
    }

    /// A walk that trusts its thread's last generation and meets a rule cached before a
    /// `dlclose` (a rule whose CFA is 1 MiB up, past the stack of a test thread) reads
    /// nothing outside the stack: it starts again with the loader's generation, which
    /// computes the rule again, and finds the right frames.
    #[test]
    fn a_stale_rule_never_reads_outside_the_stack() {
        in_new_thread(|| {
            let mut out = [MaybeUninit::uninit(); 64];
            let first = walk_here(&mut out);
            // From another call: the first return address differs, the others not.
            assert_eq!(walk_here(&mut out)[1..], first[1..], "from the cache");
            let g = crate::tls::with(|t| t.walk.generation.get());
            let stale = g ^ 1;
            crate::tls::with(|t| t.walk.generation.set(stale));
            LAST_GENERATION.store(stale, Relaxed);
            // The rule of a caller of this closure, as it might have been cached for
            // other code at the same address before a `dlclose`: the first whose slot
            // no other frame of the walk shares (the slots are hashes of addresses that
            // move from run to run; a frame sharing it would leave its own rule there,
            // where this test reads the caller's).
            let slots: Vec<usize> = first.iter().map(|&f| slot_index(f - 1)).collect();
            let k = (1..first.len())
                .find(|&k| slots.iter().filter(|&&s| s == slots[k]).count() == 1)
                .expect("a frame with a cache slot of its own");
            let addr = first[k] - 1;
            let s = &CACHE[slot_index(addr)];
            let right = Rule(s[1].load(Relaxed));
            let wrong = Rule::new(false, 1 << 20, -8, None);
            s[1].store(wrong.0, Relaxed);
            s[0].store(check(addr, wrong, stale), Relaxed);
            assert_eq!(walk_here(&mut out)[1..], first[1..]);
            assert_eq!(crate::tls::with(|t| t.walk.generation.get()), g);
            assert_eq!(s[0].load(Relaxed), check(addr, right, g), "computed again");
        });
    }

    #[inline(never)]
    fn via_a(out: &mut [MaybeUninit<u64>]) -> Vec<u64> {
        let frames = walk_here(out);
        core::hint::black_box(1);
        frames
    }

    #[inline(never)]
    fn via_b(out: &mut [MaybeUninit<u64>]) -> Vec<u64> {
        let frames = walk_here(out);
        core::hint::black_box(2);
        frames
    }

    /// Walks from the same registers through two different callers (so the same words of
    /// the stack hold other return addresses): the memo of one walk is checked word by
    /// word and never taken for the other's, and each path finds its own frames again.
    #[test]
    fn a_remembered_walk_is_checked_word_by_word() {
        in_new_thread(|| {
            let mut out = [MaybeUninit::uninit(); 64];
            type Path = fn(&mut [MaybeUninit<u64>]) -> Vec<u64>;
            let paths: [Path; 2] = [via_a, via_b];
            let mut seen: [Vec<u64>; 2] = [vec![], vec![]];
            let mut starts = [0; 2];
            for i in 0..8 {
                let frames = core::hint::black_box(paths[i % 2])(&mut out);
                starts[i % 2] = crate::tls::with(|t| t.walk.memo.start[1].get());
                if i < 2 {
                    seen[i] = frames;
                } else {
                    assert_eq!(frames, seen[i % 2], "walk {i}");
                }
            }
            assert_eq!(
                starts[0], starts[1],
                "both walks start at the same stack pointer"
            );
            // The same call again and again: recalled, with the first's serial number.
            let walks: Vec<_> = (0..3).map(|_| walk_here_numbered(&mut out)).collect();
            assert_eq!(walks[1], walks[2]);
            assert_ne!(walks[1].1, 0);
            assert_ne!(seen[0][0], seen[1][0], "returns into different callers");
            assert_eq!(seen[0][1..], seen[1][1..]);
        });
    }

    #[test]
    fn rules_pack_and_unpack() {
        let r = Rule::new(true, 16, -8, Some(-16));
        assert_eq!(
            (r.cfa_offset(), r.ra_offset(), r.bp_offset()),
            (16, -8, -16)
        );
        assert!(r.0 & Rule::CFA_FROM_BP != 0 && r.0 & Rule::BP_SAVED != 0);
        let r = Rule::new(false, 1 << 20, -8, None);
        assert_eq!(r.cfa_offset(), 1 << 20);
        assert_eq!(r.0 & (Rule::CFA_FROM_BP | Rule::BP_SAVED), 0);
        assert_eq!(Rule::new(false, 1 << 40, -8, None), Rule::UNSUPPORTED);
    }

    /// Loading and unloading a library changes the generation, so a rule cached before
    /// no longer matches (libresolv: part of glibc, never loaded by a Rust program).
    #[test]
    fn dlopen_and_dlclose_invalidate_cached_rules() {
        // Alone among the tests that walk: the generation changes under them.
        let _one = WALKS.lock().unwrap();
        let here = Regs::here().ip;
        let r = rule_at(here, slot_index(here), generation());
        let before = generation();
        assert_eq!(before, generation(), "stable while nothing is loaded");
        // SAFETY: loads a system library with no initializers that matter here.
        let lib = unsafe { libc::dlopen(c"libresolv.so.2".as_ptr(), libc::RTLD_NOW) };
        assert!(!lib.is_null());
        let loaded = generation();
        // SAFETY: the handle just opened, and nothing of the library is used.
        assert_eq!(unsafe { libc::dlclose(lib) }, 0);
        let unloaded = generation();
        assert!(before != loaded && loaded != unloaded && before != unloaded);
        assert_ne!(check(here, r, before), check(here, r, unloaded));
        assert_eq!(
            rule_at(here, slot_index(here), unloaded),
            r,
            "computed again, the same"
        );
    }
}
