//! Page sizes and page arithmetic: the one place where page-size numbers are written.
//!
//! Every other crate of tierlab (the simulator, the live recorder, the binding) spells page
//! sizes and page arithmetic through these names, never as literals.

use serde::{Deserialize, Serialize};

/// Shift of a base page (4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// Bytes in a base page (4 KiB).
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Mask of the offset within a base page.
pub const PAGE_MASK: u64 = PAGE_SIZE - 1;
/// Shift of a Knights Corner 64 KiB page.
pub const K64_SHIFT: u32 = 16;
/// Bytes in a 64 KiB page.
pub const K64_SIZE: u64 = 1 << K64_SHIFT;
/// Shift of a 2 MiB huge page (a PMD leaf on x86-64).
pub const HUGE_SHIFT: u32 = 21;
/// Bytes in a 2 MiB huge page.
pub const HUGE_SIZE: u64 = 1 << HUGE_SHIFT;
/// Mask of the offset within a 2 MiB page.
pub const HUGE_MASK: u64 = HUGE_SIZE - 1;
/// Shift of a 1 GiB page (a PUD leaf on x86-64).
pub const GIANT_SHIFT: u32 = 30;
/// Bytes in a 1 GiB page.
pub const GIANT_SIZE: u64 = 1 << GIANT_SHIFT;
/// Base pages in a 2 MiB page.
pub const PAGES_PER_HUGE: u64 = HUGE_SIZE / PAGE_SIZE;

/// A page size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PageSize {
    /// 4 KiB base pages.
    #[default]
    #[serde(rename = "4KiB")]
    Base4K,
    /// Knights Corner 64 KiB pages: 16 aligned 4 KiB PTEs cached as one TLB entry.
    #[serde(rename = "64KiB")]
    Kc64K,
    /// 2 MiB huge pages (PMD leaves).
    #[serde(rename = "2MiB")]
    Huge2M,
    /// 1 GiB pages (PUD leaves).
    #[serde(rename = "1GiB")]
    Giant1G,
}

impl PageSize {
    /// Every size, smallest first.
    pub const ALL: [PageSize; 4] = [PageSize::Base4K, PageSize::Kc64K, PageSize::Huge2M, PageSize::Giant1G];

    /// log2 of the size.
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Base4K => PAGE_SHIFT,
            PageSize::Kc64K => K64_SHIFT,
            PageSize::Huge2M => HUGE_SHIFT,
            PageSize::Giant1G => GIANT_SHIFT,
        }
    }
    /// Bytes in one page.
    #[inline]
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }
    /// Mask of the offset within a page.
    #[inline]
    pub const fn mask(self) -> u64 {
        self.bytes() - 1
    }
    /// Base (4 KiB) pages in one page of this size.
    #[inline]
    pub const fn base_pages(self) -> u64 {
        self.bytes() >> PAGE_SHIFT
    }
    /// First byte of the page holding `addr`.
    #[inline]
    pub const fn base(self, addr: u64) -> u64 {
        addr & !self.mask()
    }
    /// Page number of `addr` (`addr >> shift`).
    #[inline]
    pub const fn number(self, addr: u64) -> u64 {
        addr >> self.shift()
    }
    /// The name used in files and stats (`4KiB`, `64KiB`, `2MiB`, `1GiB`).
    pub const fn name(self) -> &'static str {
        match self {
            PageSize::Base4K => "4KiB",
            PageSize::Kc64K => "64KiB",
            PageSize::Huge2M => "2MiB",
            PageSize::Giant1G => "1GiB",
        }
    }
    /// Parse a name as written by [`PageSize::name`].
    pub fn from_name(s: &str) -> Option<PageSize> {
        PageSize::ALL.into_iter().find(|p| p.name() == s)
    }
    /// The size with `bytes` bytes.
    pub fn from_bytes(bytes: u64) -> Option<PageSize> {
        PageSize::ALL.into_iter().find(|p| p.bytes() == bytes)
    }
}

/// Base page number of `addr` (`addr >> 12`).
#[inline]
pub const fn vpn(addr: u64) -> u64 {
    addr >> PAGE_SHIFT
}

/// First byte of base page number `vpn`.
#[inline]
pub const fn page_addr(vpn: u64) -> u64 {
    vpn << PAGE_SHIFT
}

/// Number of base pages needed to hold `bytes`.
#[inline]
pub const fn pages_for(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_SIZE)
}

/// Bytes of `pages` base pages.
#[inline]
pub const fn bytes_of(pages: u64) -> u64 {
    pages << PAGE_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        for p in PageSize::ALL {
            assert_eq!(PageSize::from_name(p.name()), Some(p));
            assert_eq!(PageSize::from_bytes(p.bytes()), Some(p));
            assert_eq!(p.base(p.bytes() + 5), p.bytes());
        }
        assert_eq!(PageSize::Huge2M.base_pages(), 512);
        assert_eq!(vpn(page_addr(7) + 1), 7);
        assert_eq!(pages_for(PAGE_SIZE + 1), 2);
    }
}
