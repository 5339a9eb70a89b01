//! A block's shared memory, with a shadow for race and initialisation checks.

use kernels::cuda::emu::{Access, Site};

/// Bytes left unallocated between two arrays, so a small overrun of one lands in no array and is
/// reported instead of silently reading its neighbour.
const RED_ZONE: usize = 64;
/// Backing store: the device limit plus red zones for a generous number of arrays.
pub(super) const CAPACITY: usize = 228 * 1024 + 64 * RED_ZONE;

/// What the shadow knows about one byte: the part every access reads, packed in 32 bytes (two
/// compares, and the shadow of a large tile stays in cache). The sites, needed only when a slot
/// changes and for reports, live beside it in [`Sites`]. Threads are `thread + 1` in 16 bits: a
/// block has at most 1024 threads (the launch checks it).
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Shadow {
    /// The barrier interval of the accesses recorded below.
    interval: u32,
    /// The interval of the last write; at or after the block's first interval means "written".
    written: u32,
    /// `thread + 1` of the interval's writer, 0 for none.
    writer: u16,
    /// `thread + 1` of the interval's first reader, 0 for none.
    reader: u16,
    /// `thread + 1` of another reader of the interval, 0 for none.
    other_reader: u16,
    /// Always 0, so that the whole is a value (see `bits`).
    pad: u16,
    /// The `__syncwarp` epoch (see `order.rs`) each recorded thread was at.
    writer_epoch: u32,
    reader_epoch: u32,
    other_reader_epoch: u32,
    /// Always 0, likewise.
    pad_epoch: u32,
}

impl Shadow {
    /// The 32 bytes as two numbers, to compare two shadows at once.
    fn bits(self) -> [u128; 2] {
        // SAFETY: `repr(C)` with no implicit padding (4 + 4 + 2 * 4 + 4 * 4 = 32 bytes, aligned
        // as u128), so every byte is an initialised field.
        unsafe { std::mem::transmute::<Shadow, [u128; 2]>(self) }
    }
}

/// The sites of one byte's writer, reader and other reader (meaningful only where the slot is
/// set).
#[derive(Clone, Copy)]
struct Sites {
    writer: Site,
    reader: Site,
    other_reader: Site,
}

impl Sites {
    const WRITER: u8 = 1;
    const READER: u8 = 2;
    const OTHER_READER: u8 = 4;

    /// Sets the slots in `set` (a mask of the constants above) to `site`.
    fn set(&mut self, set: u8, site: Site) {
        if set & Self::WRITER != 0 {
            self.writer = site;
        }
        if set & Self::READER != 0 {
            self.reader = site;
        }
        if set & Self::OTHER_READER != 0 {
            self.other_reader = site;
        }
    }
}

impl Default for Sites {
    fn default() -> Self {
        Self {
            writer: Site::caller(),
            reader: Site::caller(),
            other_reader: Site::caller(),
        }
    }
}

/// A conflicting earlier access found by [`SharedArena::check`].
pub(super) struct Race {
    /// Byte offset in its array.
    pub offset: usize,
    pub thread: u32,
    pub access: Access,
    pub site: Site,
}

/// A read of a byte that no thread had written, held until the interval ends: if another thread
/// writes the byte before the next barrier, the real bug is the race, reported at that write.
#[derive(Clone, Copy)]
pub(super) struct UninitRead {
    /// Byte offset in its array.
    pub offset: usize,
    pub thread: u32,
    pub site: Site,
}

/// Per OS thread, reused block after block: shared memory never outlives its block, so the next
/// block starts from a new interval number instead of clearing anything.
pub(super) struct SharedArena {
    data: Box<[u128]>,
    shadow: Vec<Shadow>,
    sites: Vec<Sites>,
    statics: Vec<(usize, usize, usize)>,
    used: usize,
    dynamic: usize,
    block_start: u32,
    interval: u32,
    uninit_reads: Vec<UninitRead>,
}

impl Default for SharedArena {
    fn default() -> Self {
        Self {
            data: vec![0u128; CAPACITY / 16].into_boxed_slice(),
            shadow: Vec::new(),
            sites: Vec::new(),
            statics: Vec::new(),
            used: 0,
            dynamic: 0,
            block_start: 1,
            interval: 1,
            uninit_reads: Vec::new(),
        }
    }
}

impl SharedArena {
    fn base(&self) -> usize {
        self.data.as_ptr() as usize
    }

    /// Starts a new block with `dynamic` bytes of dynamic shared memory at offset 0.
    pub(super) fn begin_block(&mut self, dynamic: usize) {
        self.next_interval();
        self.block_start = self.interval;
        self.statics.clear();
        self.uninit_reads.clear();
        self.dynamic = dynamic;
        self.used = dynamic.next_multiple_of(16) + RED_ZONE;
        self.grow_shadow(self.used);
    }

    /// Every thread passed a barrier (or exited): accesses before it can no longer race with
    /// those after. Returns the first read of a byte that nobody wrote in the interval.
    pub(super) fn end_interval(&mut self) -> Option<UninitRead> {
        self.next_interval();
        let first = self.uninit_reads.first().copied();
        self.uninit_reads.clear();
        first
    }

    /// Moves to the next interval. Interval numbers are 32 bits (a smaller shadow); when they
    /// run out, the shadow is renumbered: every slot forgotten (a new interval forgets them
    /// anyway) and "written in this block" kept as interval 1, the new block start.
    fn next_interval(&mut self) {
        if self.interval == u32::MAX {
            let block_start = self.block_start;
            for s in &mut self.shadow {
                let written = u32::from(s.written >= block_start);
                *s = Shadow {
                    written,
                    ..Shadow::default()
                };
            }
            self.block_start = 1;
            self.interval = 1;
        }
        self.interval += 1;
    }

    /// `offset` (in the arena) as an offset in the array that holds it, for reports.
    pub(super) fn in_array(&self, offset: usize) -> usize {
        in_array(&self.statics, offset)
    }

    fn grow_shadow(&mut self, bytes: usize) {
        if self.shadow.len() < bytes {
            self.shadow.resize(bytes, Shadow::default());
            self.sites.resize(bytes, Sites::default());
        }
    }

    pub(super) fn dynamic_ptr(&self) -> *mut u8 {
        self.data.as_ptr() as *mut u8
    }

    /// The block's instance of static array `key`, allocated on first use; `Err(total)` when the
    /// block would exceed `limit` bytes.
    pub(super) fn static_ptr(
        &mut self,
        key: usize,
        bytes: usize,
        align: usize,
        limit: usize,
    ) -> Result<*mut u8, usize> {
        if let Some(&(_, offset, _)) = self.statics.iter().find(|s| s.0 == key) {
            return Ok((self.base() + offset) as *mut u8);
        }
        let offset = self.used.next_multiple_of(align.max(16));
        let total = self.dynamic + self.statics.iter().map(|s| s.2).sum::<usize>() + bytes;
        if total > limit || offset + bytes + RED_ZONE > CAPACITY {
            return Err(total);
        }
        self.statics.push((key, offset, bytes));
        self.used = offset + bytes + RED_ZONE;
        self.grow_shadow(self.used);
        Ok((self.base() + offset) as *mut u8)
    }

    /// The offset of `[addr, addr + bytes)` if it lies inside one allocation.
    pub(super) fn offset_of(&self, addr: usize, bytes: usize) -> Option<usize> {
        let offset = addr.checked_sub(self.base())?;
        let end = offset + bytes;
        let in_dynamic = end <= self.dynamic;
        let in_static = self
            .statics
            .iter()
            .any(|&(_, o, b)| offset >= o && end <= o + b);
        (in_dynamic || in_static).then_some(offset)
    }

    /// `addr`'s offset from the start of the arena (the block's `.shared` window address), if it
    /// points into the arena at all.
    pub(super) fn window_offset(&self, addr: usize) -> Option<usize> {
        addr.checked_sub(self.base()).filter(|&o| o < CAPACITY)
    }

    /// The host address of arena `offset`.
    pub(super) fn ptr_at(&self, offset: usize) -> *mut u8 {
        (self.base() + offset) as *mut u8
    }

    /// Records a write by the asynchronous proxy (a TMA copy landing): the bytes count as written
    /// in this interval, by no thread, so that only the copy's own mbarrier orders them (checked
    /// by the emulator's Hopper model, not by the barrier-interval shadow).
    pub(super) fn mark_async_write(&mut self, offset: usize, bytes: usize) {
        let interval = self.interval;
        for s in &mut self.shadow[offset..offset + bytes] {
            if s.interval != interval {
                *s = Shadow {
                    interval,
                    written: s.written,
                    ..Shadow::default()
                };
            }
            s.writer = 0;
            s.writer_epoch = 0;
            s.written = interval;
        }
    }

    /// Records `thread`'s access (at `__syncwarp` epoch `epoch`) to `bytes` bytes at `offset`, or
    /// returns the earlier access it races with. `before(other, its_epoch)` says whether another
    /// thread's access of this interval is ordered before this one by `__syncwarp`s.
    ///
    /// This runs on every shared-memory access, so it is written for the common case: the
    /// bytes of one access almost always share one history (they were last accessed together,
    /// by an access of the same width), and then the rule below is applied once, to the first
    /// byte's shadow, and its outcome stored to all of them. Otherwise each byte is judged on
    /// its own. The sites are written only when a slot changes.
    pub(super) fn check(
        &mut self,
        offset: usize,
        bytes: usize,
        (thread, epoch): (u32, u32),
        access: Access,
        site: Site,
        before: impl Fn(u32, u32) -> bool,
    ) -> Result<(), Race> {
        let me = u16::try_from(thread + 1).expect("a block has at most 1024 threads");
        // Whether a recorded `thread + 1` (0: none) at epoch `e` can race with this access.
        let unordered = |who: u16, e: u32| who != 0 && who != me && !before(u32::from(who) - 1, e);
        let rule = Rule {
            me,
            epoch,
            access,
            interval: self.interval,
            unordered,
        };
        let block_start = self.block_start;
        let shadow = &mut self.shadow[offset..offset + bytes];
        let sites = &mut self.sites[offset..offset + bytes];
        let first = shadow[0].bits();
        if shadow[1..].iter().all(|s| s.bits() == first) {
            let mut s = shadow[0];
            let set = record(&mut s, &sites[0], &rule)
                .map_err(|race| race.at(in_array(&self.statics, offset)))?;
            shadow.fill(s);
            if set != 0 {
                sites.iter_mut().for_each(|at| at.set(set, site));
            }
            if access == Access::Write || s.written >= block_start {
                return Ok(());
            }
        } else {
            for (i, (s, at)) in shadow.iter_mut().zip(sites.iter_mut()).enumerate() {
                let set = record(s, at, &rule)
                    .map_err(|race| race.at(in_array(&self.statics, offset + i)))?;
                at.set(set, site);
            }
        }
        if access == Access::Read {
            for (i, s) in shadow.iter().enumerate() {
                if s.written < block_start {
                    self.uninit_reads.push(UninitRead {
                        offset: in_array(&self.statics, offset + i),
                        thread,
                        site,
                    });
                }
            }
        }
        Ok(())
    }
}

/// One access, as the race rule sees it: `me` (`thread + 1`) at `__syncwarp` epoch `epoch`,
/// its kind, the interval, and whether a recorded access can race with it.
struct Rule<F> {
    me: u16,
    epoch: u32,
    access: Access,
    interval: u32,
    unordered: F,
}

/// The race rule for one byte: the access `r` against what its shadow `s` (with sites `at`)
/// recorded. Updates `s` and returns which site slots now hold this access ([`Sites::WRITER`]
/// ...), or the earlier access it conflicts with.
#[inline(always)]
fn record(s: &mut Shadow, at: &Sites, r: &Rule<impl Fn(u16, u32) -> bool>) -> Result<u8, Conflict> {
    if s.interval != r.interval {
        s.interval = r.interval;
        s.writer = 0;
        s.reader = 0;
        s.other_reader = 0;
    }
    let conflict = |thread: u16, access, site| Conflict {
        thread,
        access,
        site,
    };
    if (r.unordered)(s.writer, s.writer_epoch) {
        return Err(conflict(s.writer, Access::Write, at.writer));
    }
    match r.access {
        Access::Read => {
            // A reader ordered before this one adds nothing a later writer could race with
            // that this one does not (ordering is transitive): its slot is reused.
            if s.reader == 0 || !(r.unordered)(s.reader, s.reader_epoch) {
                s.reader = r.me;
                s.reader_epoch = r.epoch;
                return Ok(Sites::READER);
            }
            if s.other_reader == 0 || !(r.unordered)(s.other_reader, s.other_reader_epoch) {
                s.other_reader = r.me;
                s.other_reader_epoch = r.epoch;
                return Ok(Sites::OTHER_READER);
            }
            Ok(0)
        }
        Access::Write => {
            if (r.unordered)(s.reader, s.reader_epoch) {
                return Err(conflict(s.reader, Access::Read, at.reader));
            }
            if (r.unordered)(s.other_reader, s.other_reader_epoch) {
                return Err(conflict(s.other_reader, Access::Read, at.other_reader));
            }
            s.writer = r.me;
            s.writer_epoch = r.epoch;
            s.written = r.interval;
            Ok(Sites::WRITER)
        }
    }
}

/// The earlier access a byte's access conflicts with (`thread + 1`), before its offset is known.
struct Conflict {
    thread: u16,
    access: Access,
    site: Site,
}

impl Conflict {
    /// The race, at `offset` in its array.
    #[cold]
    fn at(self, offset: usize) -> Race {
        Race {
            offset,
            thread: u32::from(self.thread) - 1,
            access: self.access,
            site: self.site,
        }
    }
}

/// Arena `offset` as an offset in the static array of `statics` that holds it (else unchanged).
fn in_array(statics: &[(usize, usize, usize)], offset: usize) -> usize {
    statics
        .iter()
        .find(|&&(_, o, b)| offset >= o && offset < o + b)
        .map_or(offset, |&(_, o, _)| offset - o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No access is ordered before another by a `__syncwarp`.
    fn no_syncwarp(_: u32, _: u32) -> bool {
        false
    }

    fn arena() -> SharedArena {
        let mut a = SharedArena::default();
        a.begin_block(64);
        a
    }

    #[test]
    fn a_word_read_races_with_a_byte_written_inside_it() {
        // The word's bytes have different histories, so each byte is judged on its own.
        let (mut a, site) = (arena(), Site::caller());
        a.check(0, 4, (0, 0), Access::Write, site, no_syncwarp)
            .ok()
            .unwrap();
        a.check(6, 1, (1, 0), Access::Write, site, no_syncwarp)
            .ok()
            .unwrap();
        assert!(
            a.check(0, 4, (2, 0), Access::Read, site, no_syncwarp)
                .is_err()
        );
        let race = a
            .check(4, 4, (2, 0), Access::Read, site, no_syncwarp)
            .expect_err("byte 6 races");
        assert_eq!(
            (race.offset, race.thread, race.access),
            (6, 1, Access::Write)
        );
    }

    #[test]
    fn a_third_reader_then_a_writer_races_with_a_recorded_reader() {
        let (mut a, site) = (arena(), Site::caller());
        a.check(0, 4, (0, 0), Access::Write, site, no_syncwarp)
            .ok()
            .unwrap();
        a.end_interval();
        for t in 1..4 {
            a.check(0, 4, (t, 0), Access::Read, site, no_syncwarp)
                .ok()
                .unwrap();
        }
        let race = a
            .check(0, 4, (1, 0), Access::Write, site, no_syncwarp)
            .expect_err("thread 2 read it");
        assert_eq!(
            (race.offset, race.thread, race.access),
            (0, 2, Access::Read)
        );
    }

    #[test]
    fn interval_numbers_that_run_out_keep_what_was_written_in_the_block() {
        let (mut a, site) = (arena(), Site::caller());
        a.check(0, 4, (0, 0), Access::Write, site, no_syncwarp)
            .ok()
            .unwrap();
        a.interval = u32::MAX;
        assert!(a.end_interval().is_none());
        // Written in this block before the renumbering: no uninitialised read, no race.
        a.check(0, 4, (1, 0), Access::Read, site, no_syncwarp)
            .ok()
            .unwrap();
        assert!(a.end_interval().is_none());
        // Never written: reported at the end of the interval.
        a.check(8, 4, (1, 0), Access::Read, site, no_syncwarp)
            .ok()
            .unwrap();
        assert_eq!(a.end_interval().map(|u| u.offset), Some(8));
    }
}
