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
                s.interval = interval;
                s.reader = 0;
                s.other_reader = 0;
            }
            s.writer = 0;
            s.written = interval;
        }
    }

    /// Records `thread`'s access to `bytes` bytes at `offset`, or returns the earlier access it
    /// races with.
    pub(super) fn check(
        &mut self,
        offset: usize,
        bytes: usize,
        thread: u32,
        access: Access,
        site: Site,
    ) -> Result<(), Race> {
        let me = thread + 1;
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
            let conflict = if s.writer != 0 && s.writer != me {
                Some((s.writer, Access::Write, s.writer_site))
            } else if access == Access::Write && s.reader != 0 && s.reader != me {
                Some((s.reader, Access::Read, s.reader_site))
            } else if access == Access::Write && s.other_reader != 0 && s.other_reader != me {
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
                    if s.reader == 0 {
                        s.reader = me;
                        s.reader_site = site;
                    } else if s.reader != me && s.other_reader == 0 {
                        s.other_reader = me;
                        s.other_reader_site = site;
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
                    s.written = interval;
                }
            }
        }
        Ok(())
    }
}
