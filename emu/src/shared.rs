//! A block's shared memory, with a shadow for race and initialisation checks.

use kernels::cuda::emu::{Access, SharedArray, Site};

use super::error::Overrun;

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
    /// In a word's shadow: 1 when its four bytes are tracked one by one (see
    /// [`SharedArena`]); always 0 in a byte's, so that the whole is a value (see `bits`).
    fine: u16,
    /// The `__syncwarp` epoch (see `order.rs`) each recorded thread was at.
    writer_epoch: u32,
    reader_epoch: u32,
    other_reader_epoch: u32,
    /// The interval in which two threads unordered with each other read this byte and none
    /// wrote it ("read-shared"), else anything older. While only program order orders (no
    /// `__syncwarp` in the block), a further read in that interval changes nothing (see
    /// [`record`]), so the fast path takes it on this field alone: the common case of a
    /// broadcast read, a tile every thread of the block reads.
    read_shared: u32,
}

impl Shadow {
    /// Whether the word is read-shared in `interval` (see `read_shared`); a word tracked byte
    /// by byte never is, whatever its word shadow last held.
    #[inline(always)]
    fn read_shared_in(&self, interval: u32) -> bool {
        self.fine == 0 && self.read_shared == interval
    }

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
#[derive(Clone)]
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
///
/// The shadow has two levels. Nearly every access is a whole number of aligned 4-byte words
/// (`f32`, `u32`, vectors of them, `ldmatrix` rows), and the bytes of a word nearly always share
/// one history, so each word has one shadow (`words`) and an access costs one shadow per word,
/// not per byte. A word whose bytes part ways (a narrower or unaligned access touched it) is
/// marked `fine` and tracked byte by byte (`bytes`), until an access covering it leaves its four
/// bytes with one history again. Both levels apply the same rule ([`record`]), so every check
/// and report is the byte-granular one.
pub(super) struct SharedArena {
    data: Box<[u128]>,
    words: Vec<Shadow>,
    word_sites: Vec<Sites>,
    bytes: Vec<Shadow>,
    byte_sites: Vec<Sites>,
    statics: Vec<StaticArray>,
    /// Per word of the arena, the end offset of the allocation (dynamic or static array) that
    /// holds it, 0 in the red zones: [`offset_of`](Self::offset_of)'s look-up without a walk
    /// over the arrays (allocations are 16-aligned and apart, so a word is in at most one).
    ends: Vec<u32>,
    used: usize,
    dynamic: usize,
    block_start: u32,
    interval: u32,
    /// The interval's first read of a byte nobody wrote (the one reported).
    uninit_read: Option<UninitRead>,
}

impl Default for SharedArena {
    fn default() -> Self {
        Self {
            data: vec![0u128; CAPACITY / 16].into_boxed_slice(),
            words: Vec::new(),
            word_sites: Vec::new(),
            bytes: Vec::new(),
            byte_sites: Vec::new(),
            statics: Vec::new(),
            ends: Vec::new(),
            used: 0,
            dynamic: 0,
            block_start: 1,
            interval: 1,
            uninit_read: None,
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
        self.uninit_read = None;
        let previous = self.used.div_ceil(4).min(self.ends.len());
        self.ends[..previous].fill(0);
        self.dynamic = dynamic;
        self.used = dynamic.next_multiple_of(16) + RED_ZONE;
        self.grow_shadow(self.used);
        self.mark_allocation(0, dynamic);
    }

    /// Notes `[offset, offset + bytes)` as one allocation in `ends`.
    fn mark_allocation(&mut self, offset: usize, bytes: usize) {
        let end = u32::try_from(offset + bytes).expect("the arena is smaller than 4 GiB");
        self.ends[offset / 4..(offset + bytes).div_ceil(4)].fill(end);
    }

    /// Every thread passed a barrier (or exited): accesses before it can no longer race with
    /// those after. Returns the first read of a byte that nobody wrote in the interval.
    pub(super) fn end_interval(&mut self) -> Option<UninitRead> {
        self.next_interval();
        self.uninit_read.take()
    }

    /// Moves to the next interval. Interval numbers are 32 bits (a smaller shadow); when they
    /// run out, the shadow is renumbered: every slot forgotten (a new interval forgets them
    /// anyway) and "written in this block" kept as interval 1, the new block start.
    fn next_interval(&mut self) {
        if self.interval == u32::MAX {
            let block_start = self.block_start;
            for s in self.words.iter_mut().chain(&mut self.bytes) {
                *s = Shadow {
                    written: u32::from(s.written >= block_start),
                    fine: s.fine,
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
        let bytes = bytes.next_multiple_of(4);
        if self.bytes.len() < bytes {
            self.bytes.resize(bytes, Shadow::default());
            self.byte_sites.resize(bytes, Sites::default());
            self.words.resize(bytes / 4, Shadow::default());
            self.word_sites.resize(bytes / 4, Sites::default());
            self.ends.resize(bytes / 4, 0);
        }
    }

    /// Zeroes `[offset, offset + bytes)` (16-aligned) as written before the block started: every
    /// read finds it initialised, and no thread's access races with that write.
    fn zero_before_the_block(&mut self, offset: usize, bytes: usize) {
        self.data[offset / 16..(offset + bytes).div_ceil(16)].fill(0);
        let before = Shadow {
            written: self.block_start,
            ..Shadow::default()
        };
        let words = offset / 4..(offset + bytes).div_ceil(4);
        self.words[words.clone()].fill(before);
        self.bytes[4 * words.start..4 * words.end].fill(before);
    }

    /// Tracks the words overlapping `[offset, offset + bytes)` byte by byte from now on.
    fn split(&mut self, offset: usize, bytes: usize) {
        for w in offset / 4..(offset + bytes).div_ceil(4) {
            if self.words[w].fine == 0 {
                self.bytes[4 * w..4 * w + 4].fill(self.words[w]);
                self.byte_sites[4 * w..4 * w + 4].fill(self.word_sites[w]);
                self.words[w].fine = 1;
            }
        }
    }

    /// Tracks the fine words wholly inside `[offset, offset + bytes)` whose four bytes have one
    /// history again as words.
    fn merge(&mut self, offset: usize, bytes: usize) {
        for w in offset.div_ceil(4)..(offset + bytes) / 4 {
            let (s, at) = (
                &self.bytes[4 * w..4 * w + 4],
                &self.byte_sites[4 * w..4 * w + 4],
            );
            if self.words[w].fine != 0 && one_history(s, at) {
                self.words[w] = s[0];
                self.word_sites[w] = at[0];
            }
        }
    }

    /// The `n` bytes at arena `offset`, as the block's threads have stored them.
    pub(super) fn bytes_at(&self, offset: usize, n: usize) -> &[u8] {
        assert!(
            offset + n <= CAPACITY,
            "bytes {offset}..+{n} outside the arena"
        );
        // SAFETY: inside `data` (asserted), which the block's threads write only while they
        // run, not while the emulator holds this borrow between their device calls.
        unsafe { std::slice::from_raw_parts(self.dynamic_ptr().add(offset), n) }
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
        array: SharedArray,
    ) -> Result<*mut u8, usize> {
        if let Some(s) = self.statics.iter().find(|s| s.key == key) {
            return Ok((self.base() + s.offset) as *mut u8);
        }
        let offset = self.used.next_multiple_of(align.max(16));
        let total = self.dynamic + self.statics.iter().map(|s| s.bytes).sum::<usize>() + bytes;
        if total > limit || offset + bytes + RED_ZONE > CAPACITY {
            return Err(total);
        }
        self.statics.push(StaticArray {
            key,
            offset,
            bytes,
            array,
        });
        self.used = offset + bytes + RED_ZONE;
        self.grow_shadow(self.used);
        self.mark_allocation(offset, bytes);
        if array.zeroed {
            self.zero_before_the_block(offset, bytes);
        }
        Ok((self.base() + offset) as *mut u8)
    }

    /// The offset of `[addr, addr + bytes)` if it lies inside one allocation.
    #[inline(always)]
    pub(super) fn offset_of(&self, addr: usize, bytes: usize) -> Option<usize> {
        // The dynamic memory, else the word's static array looked up; a miss (outside, or an
        // empty access at an end) takes the walk, which decides every access the same way.
        self.offset_fast(addr, bytes).or_else(|| {
            let offset = addr.checked_sub(self.base())?;
            self.in_allocation(offset, offset + bytes).then_some(offset)
        })
    }

    /// [`offset_of`](Self::offset_of) without the walk: `None` also when the look-up misses
    /// (the full check's `offset_of` then decides), so that the fast path calls nothing.
    #[inline(always)]
    pub(super) fn offset_fast(&self, addr: usize, bytes: usize) -> Option<usize> {
        let offset = addr.checked_sub(self.base())?;
        let end = offset + bytes;
        let found = end <= self.dynamic
            || self
                .ends
                .get(offset / 4)
                .is_some_and(|&e| end <= e as usize);
        found.then_some(offset)
    }

    /// Whether `[offset, end)` lies inside the dynamic memory or one static array, found by
    /// walking the arrays.
    fn in_allocation(&self, offset: usize, end: usize) -> bool {
        end <= self.dynamic
            || self
                .statics
                .iter()
                .any(|s| offset >= s.offset && end <= s.offset + s.bytes)
    }

    /// For an access `[addr, addr + bytes)` outside every allocation: the array (or the dynamic
    /// memory) whose red zone it starts in, or that it starts in and runs past the end of: an
    /// index one past the end, as a report names it.
    pub(super) fn overrun(&self, addr: usize, bytes: usize) -> Option<Overrun> {
        let offset = addr.checked_sub(self.base())?;
        let dynamic = (self.dynamic > 0).then_some((None, 0, self.dynamic, ("byte", 1)));
        let statics = self.statics.iter().map(|s| {
            let a = s.array;
            (Some(a.name), s.offset, s.bytes, (a.elem, a.elem_bytes))
        });
        dynamic
            .into_iter()
            .chain(statics)
            .filter(|&(_, start, len, _)| offset >= start && offset + bytes > start + len)
            .filter(|&(_, start, len, _)| offset - (start + len).min(offset) < RED_ZONE)
            .max_by_key(|&(_, start, _, _)| start)
            .map(|(array, start, len, elem)| Overrun {
                array,
                start: self.base() + start,
                bytes: len,
                elem,
                past_end: offset.saturating_sub(start + len),
            })
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
        let mark = |s: &mut Shadow| {
            if s.interval != interval {
                *s = Shadow {
                    interval,
                    written: s.written,
                    fine: s.fine,
                    ..Shadow::default()
                };
            }
            s.writer = 0;
            s.writer_epoch = 0;
            s.written = interval;
            s.read_shared = 0;
        };
        if offset.is_multiple_of(4) && bytes.is_multiple_of(4) {
            let words = &mut self.words[offset / 4..(offset + bytes) / 4];
            if words.iter().all(|s| s.fine == 0) {
                words.iter_mut().for_each(mark);
                return;
            }
        }
        self.split(offset, bytes);
        self.bytes[offset..offset + bytes].iter_mut().for_each(mark);
        self.merge(offset, bytes);
    }

    /// Records `thread`'s access (at `__syncwarp` epoch `epoch`) to `bytes` bytes at `offset`, or
    /// returns the earlier access it races with. `before(other, its_epoch)` says whether another
    /// thread's access of this interval is ordered before this one by `__syncwarp`s.
    ///
    /// This runs on every shared-memory access, so it is written for the common case: an access
    /// of whole aligned words whose words share one history (they were last accessed together,
    /// by an access of the same width). Then the rule below is applied once, to the first word's
    /// shadow, and its outcome stored to all of them. Otherwise the words are split into bytes
    /// and the same is done byte by byte. The sites are written only when a slot changes.
    #[inline(always)]
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
        if offset.is_multiple_of(4) && bytes.is_multiple_of(4) {
            let (w, n) = (offset / 4, bytes / 4);
            // A fine word's `fine` is 1, so it never matches a first word that is not fine.
            let words = &mut self.words[w..w + n];
            let first = words[0].bits();
            if words[0].fine == 0 && words[1..].iter().all(|s| s.bits() == first) {
                let mut s = words[0];
                let set = record(&mut s, &rule)
                    .map_err(|c| c.at(in_array(&self.statics, offset), &self.word_sites[w]))?;
                words.fill(s);
                if set != 0 {
                    let sites = &mut self.word_sites[w..w + n];
                    sites.iter_mut().for_each(|at| at.set(set, site));
                }
                if access == Access::Read && s.written < self.block_start {
                    self.note_uninit_read(offset, thread, site);
                }
                return Ok(());
            }
        }
        self.check_fine(offset, bytes, thread, site, &rule)
    }

    /// The whole of [`check`](Self::check) for the access nearly every one is, while no
    /// `__syncwarp` has ordered anything in the block (so only program order orders): whole
    /// aligned words of one history, written in this block, that race with nothing. Returns
    /// whether it recorded the access; `false`, having changed nothing, sends the access to
    /// `check` (a race to report, a read of a word nobody wrote, a word tracked byte by byte,
    /// ...). The rule is [`record`]'s.
    #[inline(always)]
    pub(super) fn check_fast(
        &mut self,
        offset: usize,
        bytes: usize,
        thread: u32,
        access: Access,
        site: Site,
    ) -> bool {
        if bytes == 4 {
            self.check_fast_word(offset, thread, access, site)
        } else {
            self.check_fast_words(offset, bytes, thread, access, site)
        }
    }

    /// Whether a read of the word at arena `offset` finds it read-shared in this interval (see
    /// [`Shadow::read_shared`]): then, while only program order orders, the read changes
    /// nothing and is checked by this alone.
    #[inline(always)]
    pub(super) fn read_shared_at(&self, offset: usize) -> bool {
        offset.is_multiple_of(4)
            && self
                .words
                .get(offset / 4)
                .is_some_and(|s| s.read_shared_in(self.interval))
    }

    /// [`check_fast`](Self::check_fast) of one word, the commonest access, judged in place
    /// (`record` changes nothing when it finds a conflict). It calls nothing, so that the
    /// path of such an access saves only the registers it uses.
    #[inline(always)]
    pub(super) fn check_fast_word(
        &mut self,
        offset: usize,
        thread: u32,
        access: Access,
        site: Site,
    ) -> bool {
        let w = offset / 4;
        let Some(word) = self.words.get_mut(w) else {
            return false;
        };
        if !offset.is_multiple_of(4) || word.fine != 0 {
            return false;
        }
        // A read of a read-shared word: nothing to record (and were it never written, the
        // two reads that made it read-shared noted that already).
        if access == Access::Read && word.read_shared_in(self.interval) {
            return true;
        }
        // A read of a word nobody wrote in this block: the full check notes it for the
        // interval's end.
        if access == Access::Read && word.written < self.block_start {
            return false;
        }
        // One copy of the rule per kind of access, each with its kind a constant.
        let interval = self.interval;
        let recorded = match access {
            Access::Read => record(word, &fast_rule(thread, Access::Read, interval)),
            Access::Write => record(word, &fast_rule(thread, Access::Write, interval)),
        };
        let Ok(set) = recorded else {
            return false;
        };
        // The sites only when a slot changed (a broadcast read past a word's second reader
        // changes none).
        if set != 0
            && let Some(at) = self.word_sites.get_mut(w)
        {
            at.set(set, site);
        }
        true
    }

    /// [`check_fast`](Self::check_fast) of a vector of words (out of line, so that the one-word
    /// access keeps its registers): the rule applied to a copy of their shared history.
    #[inline(never)]
    fn check_fast_words(
        &mut self,
        offset: usize,
        bytes: usize,
        thread: u32,
        access: Access,
        site: Site,
    ) -> bool {
        if !(offset.is_multiple_of(4) && bytes.is_multiple_of(4)) {
            return false;
        }
        let (w, n) = (offset / 4, bytes / 4);
        let Some(words) = self.words.get_mut(w..w + n) else {
            return false;
        };
        let Some((&first, rest)) = words.split_first() else {
            return false;
        };
        if first.fine != 0
            || rest.iter().any(|other| other.bits() != first.bits())
            || (access == Access::Read && first.written < self.block_start)
        {
            return false;
        }
        let mut s = first;
        let Ok(set) = record(&mut s, &fast_rule(thread, access, self.interval)) else {
            return false;
        };
        words.fill(s);
        if set != 0 {
            let sites = &mut self.word_sites[w..w + n];
            sites.iter_mut().for_each(|at| at.set(set, site));
        }
        true
    }

    /// [`check`](Self::check) of an access that is not whole words of one history: its words
    /// are split into bytes and judged on the byte level (once when the bytes share one
    /// history, else byte by byte), then merged again where they can be.
    #[inline(never)]
    fn check_fine(
        &mut self,
        offset: usize,
        bytes: usize,
        thread: u32,
        site: Site,
        rule: &Rule<impl Fn(u16, u32) -> bool>,
    ) -> Result<(), Race> {
        self.split(offset, bytes);
        let shadow = &mut self.bytes[offset..offset + bytes];
        let sites = &mut self.byte_sites[offset..offset + bytes];
        let first = shadow[0].bits();
        if shadow[1..].iter().all(|s| s.bits() == first) {
            let mut s = shadow[0];
            let set = record(&mut s, rule)
                .map_err(|c| c.at(in_array(&self.statics, offset), &sites[0]))?;
            shadow.fill(s);
            if set != 0 {
                sites.iter_mut().for_each(|at| at.set(set, site));
            }
        } else {
            for (i, (s, at)) in shadow.iter_mut().zip(sites.iter_mut()).enumerate() {
                let set =
                    record(s, rule).map_err(|c| c.at(in_array(&self.statics, offset + i), at))?;
                at.set(set, site);
            }
        }
        if rule.access == Access::Read {
            let block_start = self.block_start;
            let unwritten = self.bytes[offset..offset + bytes]
                .iter()
                .position(|s| s.written < block_start);
            if let Some(i) = unwritten {
                self.note_uninit_read(offset + i, thread, site);
            }
        }
        self.merge(offset, bytes);
        Ok(())
    }

    /// An atomic read-modify-write reads the bytes it replaces: the first of them that nobody
    /// wrote in this block is noted as thread `thread`'s read of uninitialised memory, as a load
    /// of it would be. Called before the atomic's own write is recorded.
    pub(super) fn note_atomic_read(
        &mut self,
        offset: usize,
        bytes: usize,
        thread: u32,
        site: Site,
    ) {
        let block_start = self.block_start;
        let written = |b: usize| {
            let word = &self.words[b / 4];
            let shadow = if word.fine == 0 { word } else { &self.bytes[b] };
            shadow.written >= block_start
        };
        if let Some(b) = (offset..offset + bytes).find(|&b| !written(b)) {
            self.note_uninit_read(b, thread, site);
        }
    }

    /// A read of the byte at arena `offset` that nobody wrote: kept if it is the interval's
    /// first.
    fn note_uninit_read(&mut self, offset: usize, thread: u32, site: Site) {
        if self.uninit_read.is_none() {
            self.uninit_read = Some(UninitRead {
                offset: in_array(&self.statics, offset),
                thread,
                site,
            });
        }
    }
}

/// Whether four bytes' shadows are one history: the same shadow, and the same site in every
/// slot that holds an access.
fn one_history(s: &[Shadow], at: &[Sites]) -> bool {
    let first = s[0].bits();
    let same_site =
        |slot: fn(&Sites) -> Site, who: u16| who == 0 || at.iter().all(|a| slot(a) == slot(&at[0]));
    s[1..].iter().all(|b| b.bits() == first)
        && same_site(|a| a.writer, s[0].writer)
        && same_site(|a| a.reader, s[0].reader)
        && same_site(|a| a.other_reader, s[0].other_reader)
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

/// The rule for `thread`'s access before any `__syncwarp` in the block: only program order
/// orders, so every recorded access by another thread is unordered with it.
#[inline(always)]
fn fast_rule(thread: u32, access: Access, interval: u32) -> Rule<impl Fn(u16, u32) -> bool> {
    debug_assert!(thread < 1024, "a block has at most 1024 threads");
    let me = thread as u16 + 1;
    Rule {
        me,
        epoch: 0,
        access,
        interval,
        unordered: move |who: u16, _| who != 0 && who != me,
    }
}

/// The race rule for one byte: the access `r` against what its shadow `s` recorded. Updates `s`
/// and returns which site slots now hold this access ([`Sites::WRITER`] ...), or the earlier
/// access it conflicts with (its site in the slot it names), leaving `s` as it was (a conflict needs a
/// slot of this interval, so the reset of a new interval never precedes one).
#[inline(always)]
fn record(s: &mut Shadow, r: &Rule<impl Fn(u16, u32) -> bool>) -> Result<u8, Conflict> {
    if s.interval != r.interval {
        s.interval = r.interval;
        s.writer = 0;
        s.reader = 0;
        s.other_reader = 0;
    }
    let conflict = |thread: u16, access, slot| Conflict {
        thread,
        access,
        slot,
    };
    if (r.unordered)(s.writer, s.writer_epoch) {
        return Err(conflict(s.writer, Access::Write, Sites::WRITER));
    }
    match r.access {
        Access::Read => {
            // This thread's own read at this epoch is recorded already: nothing new (its slot
            // keeps the first site).
            let mine = |who: u16, e: u32| who == r.me && e == r.epoch;
            if mine(s.reader, s.reader_epoch) || mine(s.other_reader, s.other_reader_epoch) {
                return Ok(0);
            }
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
                // Two readers unordered with each other and no writer: under program order
                // alone, any later read of the interval is unordered with both, so it finds
                // no conflict and, both slots being others' (or its own, above), changes
                // nothing. (A writer ordered before both, possible only through `__syncwarp`,
                // leaves the byte not read-shared.)
                if s.writer == 0 {
                    s.read_shared = r.interval;
                }
                return Ok(Sites::OTHER_READER);
            }
            Ok(0)
        }
        Access::Write => {
            if (r.unordered)(s.reader, s.reader_epoch) {
                return Err(conflict(s.reader, Access::Read, Sites::READER));
            }
            if (r.unordered)(s.other_reader, s.other_reader_epoch) {
                return Err(conflict(s.other_reader, Access::Read, Sites::OTHER_READER));
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
    /// Which of the byte's [`Sites`] holds the earlier access's site (`Sites::WRITER` ...):
    /// looked up only for a report, so that the rule reads no site.
    slot: u8,
}

impl Conflict {
    /// The race, at `offset` in its array, its byte's sites `at`.
    #[cold]
    fn at(self, offset: usize, at: &Sites) -> Race {
        let site = match self.slot {
            Sites::WRITER => at.writer,
            Sites::READER => at.reader,
            _ => at.other_reader,
        };
        Race {
            offset,
            thread: u32::from(self.thread) - 1,
            access: self.access,
            site,
        }
    }
}

/// Arena `offset` as an offset in the static array of `statics` that holds it (else unchanged).
/// A static shared array of the block: its key (the declaring site), where it lies in the
/// arena, and how the kernel named it.
struct StaticArray {
    key: usize,
    offset: usize,
    bytes: usize,
    array: SharedArray,
}

fn in_array(statics: &[StaticArray], offset: usize) -> usize {
    statics
        .iter()
        .find(|s| offset >= s.offset && offset < s.offset + s.bytes)
        .map_or(offset, |s| offset - s.offset)
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

    /// `thread`'s access at `__syncwarp` epoch 0, which must find nothing wrong.
    fn accept(a: &mut SharedArena, offset: usize, bytes: usize, thread: u32, access: Access) {
        let checked = a.check(
            offset,
            bytes,
            (thread, 0),
            access,
            Site::caller(),
            no_syncwarp,
        );
        assert!(
            checked.is_ok(),
            "{bytes} bytes at {offset} by thread {thread}"
        );
    }

    #[test]
    fn a_word_read_races_with_a_byte_written_inside_it() {
        // The word's bytes have different histories, so each byte is judged on its own.
        let (mut a, site) = (arena(), Site::caller());
        accept(&mut a, 0, 4, 0, Access::Write);
        accept(&mut a, 6, 1, 1, Access::Write);
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
        accept(&mut a, 0, 4, 0, Access::Write);
        a.end_interval();
        for t in 1..4 {
            accept(&mut a, 0, 4, t, Access::Read);
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
        let mut a = arena();
        accept(&mut a, 0, 4, 0, Access::Write);
        a.interval = u32::MAX;
        assert!(a.end_interval().is_none());
        // Written in this block before the renumbering: no uninitialised read, no race.
        accept(&mut a, 0, 4, 1, Access::Read);
        assert!(a.end_interval().is_none());
        // Never written: reported at the end of the interval.
        accept(&mut a, 8, 4, 1, Access::Read);
        assert_eq!(a.end_interval().map(|u| u.offset), Some(8));
    }

    #[test]
    fn a_word_written_byte_by_byte_by_one_access_each_is_a_word_again_after_a_covering_write() {
        let mut a = arena();
        for b in 0..4 {
            accept(&mut a, b, 1, b as u32, Access::Write);
        }
        assert_eq!(a.words[0].fine, 1);
        a.end_interval();
        accept(&mut a, 0, 4, 5, Access::Write);
        assert_eq!(a.words[0].fine, 0, "one history again: tracked as a word");
        a.end_interval();
        accept(&mut a, 0, 4, 6, Access::Read);
        let race = a
            .check(2, 2, (7, 0), Access::Write, Site::caller(), no_syncwarp)
            .expect_err("thread 6 read the word");
        assert_eq!(
            (race.offset, race.thread, race.access),
            (2, 6, Access::Read)
        );
        assert!(a.end_interval().is_none());
    }

    #[test]
    fn the_first_unwritten_byte_read_is_reported_at_the_interval_end() {
        let mut a = arena();
        accept(&mut a, 16, 1, 0, Access::Write);
        // Bytes 16 (written) and 17 (not): the byte level, reporting byte 17.
        accept(&mut a, 16, 2, 0, Access::Read);
        // A later unwritten word is not the first.
        accept(&mut a, 32, 4, 1, Access::Read);
        let first = a.end_interval().expect("an unwritten read");
        assert_eq!((first.offset, first.thread), (17, 0));
    }

    #[test]
    fn a_read_shared_word_takes_reads_and_races_with_any_write() {
        let (mut a, site) = (arena(), Site::caller());
        accept(&mut a, 0, 4, 0, Access::Write);
        a.end_interval();
        assert!(!a.read_shared_at(0));
        // Two threads read it: read-shared for this interval, so a third's read is taken on the
        // mark alone (and by the fast path, which counts it).
        accept(&mut a, 0, 4, 1, Access::Read);
        assert!(!a.read_shared_at(0), "one reader is not yet two");
        accept(&mut a, 0, 4, 2, Access::Read);
        assert!(a.read_shared_at(0));
        assert!(a.check_fast(0, 4, 3, Access::Read, site));
        // Any write now races: by a reader with the other reader, by anyone else with a reader.
        for writer in [1, 2, 3] {
            assert!(!a.check_fast(0, 4, writer, Access::Write, site));
            let race = a
                .check(0, 4, (writer, 0), Access::Write, site, no_syncwarp)
                .expect_err("a write after two readers races");
            assert!(race.thread != writer && [1, 2].contains(&race.thread));
        }
        // The next interval forgets the mark.
        a.end_interval();
        assert!(!a.read_shared_at(0));
        accept(&mut a, 0, 4, 3, Access::Write);
    }

    #[test]
    fn a_threads_repeated_read_keeps_its_first_site_for_the_report() {
        let mut a = arena();
        accept(&mut a, 0, 4, 0, Access::Write);
        a.end_interval();
        let (first, second) = (Site::caller(), Site::caller());
        for site in [first, second] {
            let read = a.check(0, 4, (1, 0), Access::Read, site, no_syncwarp);
            assert!(read.is_ok());
        }
        let race = a
            .check(0, 4, (2, 0), Access::Write, Site::caller(), no_syncwarp)
            .expect_err("the write races with thread 1's reads");
        assert_eq!((race.thread, race.site), (1, first));
    }

    #[test]
    fn the_fast_path_agrees_with_the_full_check() {
        // The same pseudo-random accesses (bytes, halves, words and vectors, by four threads,
        // with barriers between) through `check` alone and through `check_fast` first.
        let (mut full, mut fast) = (arena(), arena());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        let outcome = |r: Result<(), Race>| r.err().map(|r| (r.offset, r.thread, r.access));
        for _ in 0..20_000 {
            if next(50) == 0 {
                let ends = (full.end_interval(), fast.end_interval());
                let key = |u: Option<UninitRead>| u.map(|u| (u.offset, u.thread));
                assert_eq!(key(ends.0), key(ends.1));
                continue;
            }
            let bytes: usize = [1, 2, 4, 4, 4, 8, 16][next(7)];
            let offset = next(64 / bytes as u64) * bytes;
            let thread = next(4) as u32;
            let access = if next(3) == 0 {
                Access::Write
            } else {
                Access::Read
            };
            let site = Site::caller();
            let expected =
                outcome(full.check(offset, bytes, (thread, 0), access, site, no_syncwarp));
            let got = if fast.check_fast(offset, bytes, thread, access, site) {
                None
            } else {
                outcome(fast.check(offset, bytes, (thread, 0), access, site, no_syncwarp))
            };
            assert_eq!(
                got, expected,
                "{bytes} bytes at {offset} by thread {thread}"
            );
            if expected.is_some() {
                // A race ends a launch; start the next from a clean interval.
                full.end_interval();
                fast.end_interval();
            }
        }
    }

    #[test]
    fn an_array_zeroed_before_the_block_reads_as_written_zeros_and_races_with_nothing() {
        let mut a = SharedArena::default();
        a.begin_block(0);
        let array = |zeroed| SharedArray {
            name: "t",
            elem: "u8",
            elem_bytes: 1,
            zeroed,
        };
        // Leave nonzero bytes behind in a first block, as the arena is reused.
        let p = a.static_ptr(0, 64, 16, CAPACITY, array(false)).unwrap();
        unsafe { std::ptr::write_bytes(p, 0xAB, 64) };
        a.begin_block(0);
        let p = a.static_ptr(1, 64, 16, CAPACITY, array(true)).unwrap();
        let offset = p as usize - a.base();
        assert!((0..64).all(|i| unsafe { *p.add(i) } == 0));
        // Two threads read the zeros, a third overwrites others: none of it is an uninitialised
        // read, and the write does not race with the driver's.
        accept(&mut a, offset, 8, 0, Access::Read);
        accept(&mut a, offset, 8, 1, Access::Read);
        accept(&mut a, offset + 8, 8, 2, Access::Write);
        assert!(
            a.end_interval().is_none(),
            "a read of the zeroed bytes is not uninitialised"
        );
        let plain = a.static_ptr(2, 16, 16, CAPACITY, array(false)).unwrap() as usize - a.base();
        accept(&mut a, plain, 4, 0, Access::Read);
        assert!(
            a.end_interval().is_some(),
            "a kernel's own array still starts uninitialised"
        );
    }

    #[test]
    fn the_allocation_look_up_agrees_with_the_walk_over_the_arrays() {
        // Blocks of odd-sized dynamic memory and static arrays, each laid over the last one's
        // (so stale entries would show), every offset and width up to past the end.
        let mut a = SharedArena::default();
        for (dynamic, statics) in [(64, &[12, 3, 40][..]), (0, &[5, 64]), (6, &[]), (0, &[])] {
            a.begin_block(dynamic);
            for (key, &bytes) in statics.iter().enumerate() {
                let array = SharedArray {
                    name: "t",
                    elem: "u8",
                    elem_bytes: 1,
                    zeroed: false,
                };
                a.static_ptr(key, bytes, 4, CAPACITY, array).unwrap();
            }
            for offset in 0..a.used + 8 {
                for bytes in [0, 1, 2, 3, 4, 8, 16] {
                    let walked = a.in_allocation(offset, offset + bytes).then_some(offset);
                    assert_eq!(
                        a.offset_of(a.base() + offset, bytes),
                        walked,
                        "{bytes} bytes at {offset} (dynamic {dynamic}, arrays {statics:?})"
                    );
                }
            }
        }
    }
}
