//! A block's shared memory, with a shadow for race and initialisation checks.

use kernels::cuda::emu::{Access, Site};

/// Bytes left unallocated between two arrays, so a small overrun of one lands in no array and is
/// reported instead of silently reading its neighbour.
const RED_ZONE: usize = 64;
/// Backing store: the device limit plus red zones for a generous number of arrays.
pub(super) const CAPACITY: usize = 228 * 1024 + 64 * RED_ZONE;

/// What the shadow knows about one byte.
#[derive(Clone, Copy)]
struct Shadow {
    /// The barrier interval of the accesses recorded below.
    interval: u64,
    /// The interval of the last write; at or after the block's first interval means "written".
    written: u64,
    /// `thread + 1` of the interval's writer, 0 for none.
    writer: u32,
    /// `thread + 1` of the interval's first reader, 0 for none.
    reader: u32,
    /// `thread + 1` of another reader of the interval, 0 for none.
    other_reader: u32,
    writer_site: Site,
    reader_site: Site,
    other_reader_site: Site,
    /// The `__syncwarp` epoch (see `order.rs`) each recorded thread was at.
    writer_epoch: u32,
    reader_epoch: u32,
    other_reader_epoch: u32,
}

impl Default for Shadow {
    fn default() -> Self {
        Self {
            interval: 0,
            written: 0,
            writer: 0,
            reader: 0,
            other_reader: 0,
            writer_site: Site::caller(),
            reader_site: Site::caller(),
            other_reader_site: Site::caller(),
            writer_epoch: 0,
            reader_epoch: 0,
            other_reader_epoch: 0,
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
    statics: Vec<(usize, usize, usize)>,
    used: usize,
    dynamic: usize,
    block_start: u64,
    interval: u64,
    uninit_reads: Vec<UninitRead>,
}

impl Default for SharedArena {
    fn default() -> Self {
        Self {
            data: vec![0u128; CAPACITY / 16].into_boxed_slice(),
            shadow: Vec::new(),
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
        self.interval += 1;
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
        self.interval += 1;
        let first = self.uninit_reads.first().copied();
        self.uninit_reads.clear();
        first
    }

    /// `offset` (in the arena) as an offset in the array that holds it, for reports.
    pub(super) fn in_array(&self, offset: usize) -> usize {
        self.statics
            .iter()
            .find(|&&(_, o, b)| offset >= o && offset < o + b)
            .map_or(offset, |&(_, o, _)| offset - o)
    }

    fn grow_shadow(&mut self, bytes: usize) {
        if self.shadow.len() < bytes {
            self.shadow.resize(bytes, Shadow::default());
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

    /// Records `thread`'s access (at `__syncwarp` epoch `epoch`) to `bytes` bytes at `offset`, or
    /// returns the earlier access it races with. `before(other, its_epoch)` says whether another
    /// thread's access of this interval is ordered before this one by `__syncwarp`s.
    pub(super) fn check(
        &mut self,
        offset: usize,
        bytes: usize,
        (thread, epoch): (u32, u32),
        access: Access,
        site: Site,
        before: impl Fn(u32, u32) -> bool,
    ) -> Result<(), Race> {
        let me = thread + 1;
        // Whether a recorded `thread + 1` (0: none) at epoch `e` can race with this access.
        let unordered = |who: u32, e: u32| who != 0 && who != me && !before(who - 1, e);
        let (interval, block_start) = (self.interval, self.block_start);
        for o in offset..offset + bytes {
            let s = &mut self.shadow[o];
            if s.interval != interval {
                s.interval = interval;
                s.writer = 0;
                s.reader = 0;
                s.other_reader = 0;
            }
            // (thread + 1, access, site) of an earlier access by another thread that conflicts.
            let conflict = if unordered(s.writer, s.writer_epoch) {
                Some((s.writer, Access::Write, s.writer_site))
            } else if access == Access::Write && unordered(s.reader, s.reader_epoch) {
                Some((s.reader, Access::Read, s.reader_site))
            } else if access == Access::Write && unordered(s.other_reader, s.other_reader_epoch) {
                Some((s.other_reader, Access::Read, s.other_reader_site))
            } else {
                None
            };
            if let Some((other, access, site)) = conflict {
                return Err(Race {
                    offset: self.in_array(o),
                    thread: other - 1,
                    access,
                    site,
                });
            }
            match access {
                Access::Read => {
                    // A reader ordered before this one adds nothing a later writer could race
                    // with that this one does not (ordering is transitive): its slot is reused.
                    if s.reader == 0 || !unordered(s.reader, s.reader_epoch) {
                        s.reader = me;
                        s.reader_site = site;
                        s.reader_epoch = epoch;
                    } else if s.other_reader == 0
                        || !unordered(s.other_reader, s.other_reader_epoch)
                    {
                        s.other_reader = me;
                        s.other_reader_site = site;
                        s.other_reader_epoch = epoch;
                    }
                    if s.written < block_start {
                        let offset = self.in_array(o);
                        self.uninit_reads.push(UninitRead {
                            offset,
                            thread,
                            site,
                        });
                    }
                }
                Access::Write => {
                    s.writer = me;
                    s.writer_site = site;
                    s.writer_epoch = epoch;
                    s.written = interval;
                }
            }
        }
        Ok(())
    }
}
