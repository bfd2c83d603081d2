//! Ownership of librdkafka objects made through FFI (where rdkafka has no
//! safe wrapper): each is destroyed exactly once, on every path out.

/// A librdkafka object and the function that destroys it.
pub(crate) struct Owned<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    /// Takes ownership of `ptr` (null is allowed: nothing to destroy).
    pub(crate) fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Owned<T> {
        Owned { ptr, destroy }
    }

    pub(crate) fn ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: created by the matching librdkafka constructor and
            // destroyed once, here.
            unsafe { (self.destroy)(self.ptr) }
        }
    }
}
