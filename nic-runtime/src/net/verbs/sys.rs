//! The device calls: opening a device, the protection domain, the two
//! completion queues, the UD queue pair (RESET → INIT → RTR → RTS), the
//! one registered memory region, address handles, and posting / polling.
//! Everything `unsafe` of the transport is here; the rest of the module
//! is plain Rust on the values this file hands back.
//!
//! Untested on hardware: nothing here has run against a device (see the
//! module documentation of `net::verbs`).

use super::addr::{Route, VerbsPeer};
use super::config::{VerbsConfig, VerbsError, VERBS_BURST_MAX};
use super::device::{SendWr, VerbsDevice};
use super::pool::Slot;
use super::recv::RecvCompletion;
use ibverbs_sys as ffi;
use std::ffi::CStr;
use std::ptr;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The names of the RDMA devices present.
///
/// # Errors
/// The `errno` of `ibv_get_device_list` when it fails (`ENOSYS`: the
/// kernel has no RDMA support).
pub fn device_names() -> Result<Vec<String>, i32> {
    let mut n: std::os::raw::c_int = 0;
    // SAFETY: ibv_get_device_list writes n and returns a NULL-terminated
    // array (or NULL), freed below.
    let list = unsafe { ffi::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(errno());
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n entries; each name is a C string owned by the list.
        unsafe {
            let dev = *list.add(i);
            let name = ffi::ibv_get_device_name(dev);
            if !name.is_null() {
                names.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
    }
    // SAFETY: the list came from ibv_get_device_list.
    unsafe { ffi::ibv_free_device_list(list) };
    Ok(names)
}

/// An address handle.
pub struct Ah(*mut ffi::ibv_ah);

// SAFETY: an address handle may be used from any thread; it is owned by
// one transport and not shared.
unsafe impl Send for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah, destroyed once.
        unsafe { ffi::ibv_destroy_ah(self.0) };
    }
}

/// An open device with its UD queue pair and registered region. Dropped
/// in reverse order of creation.
pub struct Device {
    name: String,
    ctx: *mut ffi::ibv_context,
    pd: *mut ffi::ibv_pd,
    send_cq: *mut ffi::ibv_cq,
    recv_cq: *mut ffi::ibv_cq,
    qp: *mut ffi::ibv_qp,
    mr: *mut ffi::ibv_mr,
    region: Box<[u8]>,
    slot_bytes: usize,
    port: u8,
    gid_index: u8,
    inline_max: usize,
    is_global_port: bool,
    lid: u16,
    gid: [u8; 16],
}

// SAFETY: the handles are used only by the thread that holds the Device
// (verbs objects may move between threads; none is shared).
unsafe impl Send for Device {}

impl Device {
    /// Opens `cfg.device` (or the first device) and sets up everything.
    ///
    /// # Errors
    /// [`VerbsError::NoDevice`] when there is none (or none by that
    /// name), [`VerbsError::PortDown`], [`VerbsError::Setup`].
    pub fn open(cfg: &VerbsConfig) -> Result<Device, VerbsError> {
        let no_device = |names: Vec<String>, errno| VerbsError::NoDevice {
            wanted: cfg.device.clone(),
            available: names.len(),
            names,
            errno,
        };
        let names = device_names().map_err(|e| no_device(Vec::new(), e))?;
        let index = match &cfg.device {
            Some(w) => names.iter().position(|n| n == w),
            None => (!names.is_empty()).then_some(0),
        };
        let Some(index) = index else {
            return Err(no_device(names, 0));
        };
        let name = names[index].clone();
        let mut n = 0;
        // SAFETY: as in device_names; the list is freed after opening.
        let ctx = unsafe {
            let list = ffi::ibv_get_device_list(&mut n);
            if list.is_null() || index >= n.max(0) as usize {
                if !list.is_null() {
                    ffi::ibv_free_device_list(list);
                }
                return Err(no_device(names, errno()));
            }
            let ctx = ffi::ibv_open_device(*list.add(index));
            ffi::ibv_free_device_list(list);
            ctx
        };
        let setup = |step| VerbsError::Setup {
            device: name.clone(),
            step,
            errno: errno(),
        };
        if ctx.is_null() {
            return Err(setup("ibv_open_device"));
        }
        let mut dev = Device {
            name: name.clone(),
            ctx,
            pd: ptr::null_mut(),
            send_cq: ptr::null_mut(),
            recv_cq: ptr::null_mut(),
            qp: ptr::null_mut(),
            mr: ptr::null_mut(),
            region: vec![0u8; cfg.slots() as usize * cfg.slot_bytes()].into_boxed_slice(),
            slot_bytes: cfg.slot_bytes(),
            port: cfg.port,
            gid_index: cfg.gid_index,
            inline_max: 0,
            is_global_port: false,
            lid: 0,
            gid: [0; 16],
        };
        dev.check_port()?;
        dev.create(cfg).map_err(setup)?;
        Ok(dev)
    }

    fn check_port(&mut self) -> Result<(), VerbsError> {
        // SAFETY: ibv_port_attr is plain data; the exported ibv_query_port
        // fills the compat layout, a prefix of it.
        let mut attr: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            ffi::ibv_query_port(
                self.ctx,
                self.port,
                (&mut attr as *mut ffi::ibv_port_attr).cast(),
            )
        };
        if rc != 0 {
            return Err(VerbsError::Setup {
                device: self.name.clone(),
                step: "ibv_query_port",
                errno: rc,
            });
        }
        if attr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(VerbsError::PortDown {
                device: self.name.clone(),
                port: self.port,
                state: attr.state,
            });
        }
        // Ethernet link layer (RoCE): every datagram carries a GRH.
        self.is_global_port = u32::from(attr.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET;
        self.lid = attr.lid;
        // SAFETY: ibv_gid is 16 plain bytes.
        let mut gid: ffi::ibv_gid = unsafe { std::mem::zeroed() };
        let rc =
            unsafe { ffi::ibv_query_gid(self.ctx, self.port, self.gid_index.into(), &mut gid) };
        if rc != 0 {
            return Err(VerbsError::Setup {
                device: self.name.clone(),
                step: "ibv_query_gid",
                errno: rc,
            });
        }
        // SAFETY: every bit pattern is a valid raw GID.
        self.gid = unsafe { gid.raw };
        Ok(())
    }

    /// PD, CQs, QP to RTS, MR. Returns the failing call's name.
    fn create(&mut self, cfg: &VerbsConfig) -> Result<(), &'static str> {
        // SAFETY: each handle is checked for NULL before use and owned by
        // self (Drop releases what was created).
        unsafe {
            self.pd = ffi::ibv_alloc_pd(self.ctx);
            if self.pd.is_null() {
                return Err("ibv_alloc_pd");
            }
            let cq = |depth: u32| {
                ffi::ibv_create_cq(self.ctx, depth as i32, ptr::null_mut(), ptr::null_mut(), 0)
            };
            self.send_cq = cq(cfg.send_depth);
            if self.send_cq.is_null() {
                return Err("ibv_create_cq (send)");
            }
            self.recv_cq = cq(cfg.recv_depth);
            if self.recv_cq.is_null() {
                return Err("ibv_create_cq (receive)");
            }
            let mut init = ffi::ibv_qp_init_attr {
                qp_context: ptr::null_mut(),
                send_cq: self.send_cq,
                recv_cq: self.recv_cq,
                srq: ptr::null_mut(),
                cap: ffi::ibv_qp_cap {
                    max_send_wr: cfg.send_depth,
                    max_recv_wr: cfg.recv_depth,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: cfg.inline_request,
                },
                qp_type: ffi::ibv_qp_type::IBV_QPT_UD,
                sq_sig_all: 0,
            };
            self.qp = ffi::ibv_create_qp(self.pd, &mut init);
            if self.qp.is_null() {
                return Err("ibv_create_qp");
            }
            // The device writes back what it granted.
            self.inline_max = init.cap.max_inline_data as usize;
            self.bring_up(cfg.qkey)?;
            let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
            self.mr = ffi::ibv_reg_mr(
                self.pd,
                self.region.as_mut_ptr().cast(),
                self.region.len(),
                access,
            );
            if self.mr.is_null() {
                return Err("ibv_reg_mr");
            }
        }
        Ok(())
    }

    /// Moves the queue pair RESET → INIT (port, P_Key index 0, QKey) →
    /// RTR → RTS (send PSN 0); a UD queue pair needs no remote attributes.
    unsafe fn bring_up(&mut self, qkey: u32) -> Result<(), &'static str> {
        use ffi::ibv_qp_attr_mask as M;
        let mut attr: ffi::ibv_qp_attr = std::mem::zeroed();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = self.port;
        attr.qkey = qkey;
        let mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0 | M::IBV_QP_QKEY.0;
        if ffi::ibv_modify_qp(self.qp, &mut attr, mask as i32) != 0 {
            return Err("ibv_modify_qp (INIT)");
        }
        let mut attr: ffi::ibv_qp_attr = std::mem::zeroed();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
        if ffi::ibv_modify_qp(self.qp, &mut attr, M::IBV_QP_STATE.0 as i32) != 0 {
            return Err("ibv_modify_qp (RTR)");
        }
        let mut attr: ffi::ibv_qp_attr = std::mem::zeroed();
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
        attr.sq_psn = 0;
        if ffi::ibv_modify_qp(
            self.qp,
            &mut attr,
            (M::IBV_QP_STATE.0 | M::IBV_QP_SQ_PSN.0) as i32,
        ) != 0
        {
            return Err("ibv_modify_qp (RTS)");
        }
        Ok(())
    }
}

/// Polls `cq` for up to `out.len()` completions; a failed poll (a negative
/// return) counts as none.
fn poll(cq: *mut ffi::ibv_cq, out: &mut [ffi::ibv_wc]) -> usize {
    // SAFETY: cq is valid; poll_cq writes at most out.len() entries.
    unsafe {
        let Some(poll) = (*(*cq).context).ops.poll_cq else {
            return 0;
        };
        let n = poll(cq, out.len() as i32, out.as_mut_ptr());
        n.max(0) as usize
    }
}

impl VerbsDevice for Device {
    type Ah = Ah;

    /// The device's name.
    fn name(&self) -> &str {
        &self.name
    }

    /// This queue pair's number.
    fn qpn(&self) -> u32 {
        // SAFETY: qp is valid after open.
        unsafe { (*self.qp).qp_num }
    }

    /// How peers reach this port: its GID (RoCE: every datagram has a
    /// GRH) or its LID (InfiniBand).
    fn route(&self) -> Route {
        if self.is_global_port {
            Route::Gid(super::addr::Gid(self.gid))
        } else {
            Route::Lid(self.lid)
        }
    }

    /// Inline bytes the device granted.
    fn inline_max(&self) -> usize {
        self.inline_max
    }

    /// Slot `slot`'s bytes.
    fn slot(&self, slot: Slot) -> &[u8] {
        let start = slot.0 as usize * self.slot_bytes;
        &self.region[start..start + self.slot_bytes]
    }

    /// Slot `slot`'s bytes, to fill.
    fn slot_mut(&mut self, slot: Slot) -> &mut [u8] {
        let start = slot.0 as usize * self.slot_bytes;
        &mut self.region[start..start + self.slot_bytes]
    }

    /// An address handle for `peer`.
    ///
    /// # Errors
    /// The `errno` of `ibv_create_ah`.
    fn address_handle(&self, peer: &VerbsPeer) -> Result<Ah, i32> {
        // SAFETY: plain data, then a checked create.
        unsafe {
            let mut attr: ffi::ibv_ah_attr = std::mem::zeroed();
            attr.port_num = self.port;
            match peer.route {
                Route::Gid(gid) => {
                    attr.is_global = 1;
                    attr.grh.dgid.raw = gid.0;
                    attr.grh.sgid_index = self.gid_index;
                    attr.grh.hop_limit = 64;
                }
                Route::Lid(lid) => {
                    if self.is_global_port {
                        // RoCE needs a GID; a LID route cannot work.
                        return Err(libc::EINVAL);
                    }
                    attr.dlid = lid;
                }
            }
            let ah = ffi::ibv_create_ah(self.pd, &mut attr);
            if ah.is_null() {
                return Err(errno());
            }
            Ok(Ah(ah))
        }
    }

    /// Posts receives of `slots` (at most [`VERBS_BURST_MAX`]) in one chain.
    ///
    /// # Errors
    /// The post's return code; the receives from the failing one on were
    /// not posted (`Err((posted, rc))`).
    fn post_recvs(&mut self, slots: &[Slot]) -> Result<(), (usize, i32)> {
        let n = slots.len().min(VERBS_BURST_MAX);
        if n == 0 {
            return Ok(());
        }
        // SAFETY: mr is valid; each sge lies within the registered region.
        unsafe {
            let lkey = (*self.mr).lkey;
            let mut sges = [ffi::ibv_sge::default(); VERBS_BURST_MAX];
            let mut wrs: [ffi::ibv_recv_wr; VERBS_BURST_MAX] = std::mem::zeroed();
            for i in 0..n {
                let start = slots[i].0 as usize * self.slot_bytes;
                sges[i] = ffi::ibv_sge {
                    addr: self.region.as_ptr().add(start) as u64,
                    length: self.slot_bytes as u32,
                    lkey,
                };
            }
            for i in 0..n {
                wrs[i].wr_id = u64::from(slots[i].0);
                wrs[i].sg_list = &mut sges[i];
                wrs[i].num_sge = 1;
                wrs[i].next = if i + 1 < n {
                    &mut wrs[i + 1]
                } else {
                    ptr::null_mut()
                };
            }
            let mut bad: *mut ffi::ibv_recv_wr = ptr::null_mut();
            let post = (*(*self.qp).context)
                .ops
                .post_recv
                .ok_or((0, libc::ENOSYS))?;
            let rc = post(self.qp, wrs.as_mut_ptr(), &mut bad);
            if rc != 0 {
                let posted = (0..n).find(|&i| ptr::eq(&wrs[i], bad)).unwrap_or(0);
                return Err((posted, rc));
            }
        }
        Ok(())
    }

    /// Posts `sends` (at most [`VERBS_BURST_MAX`]) in one chain.
    ///
    /// # Errors
    /// As [`Device::post_recvs`].
    ///
    /// # Safety
    /// Each send's payload is `plan.bytes` readable bytes, inside this
    /// device's region unless the send is inline; each `ah` is a live
    /// handle of this device.
    unsafe fn post_sends(&mut self, sends: &[SendWr]) -> Result<(), (usize, i32)> {
        let n = sends.len().min(VERBS_BURST_MAX);
        if n == 0 {
            return Ok(());
        }
        // SAFETY: non-inline payloads are slots of the registered region;
        // inline payloads are read by the post call itself.
        unsafe {
            let lkey = (*self.mr).lkey;
            let mut sges = [ffi::ibv_sge::default(); VERBS_BURST_MAX];
            let mut wrs: [ffi::ibv_send_wr; VERBS_BURST_MAX] = std::mem::zeroed();
            for (i, s) in sends[..n].iter().enumerate() {
                sges[i] = ffi::ibv_sge {
                    addr: s.payload as u64,
                    length: s.plan.bytes as u32,
                    lkey,
                };
                let mut flags = 0;
                if s.plan.inline {
                    flags |= ffi::ibv_send_flags::IBV_SEND_INLINE.0;
                }
                if s.plan.signaled {
                    flags |= ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
                }
                let wr = &mut wrs[i];
                wr.wr_id = s.plan.wr_id;
                wr.num_sge = 1;
                wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                wr.send_flags = flags;
                wr.__bindgen_anon_1.imm_data = s.imm.to_be();
                wr.wr.ud = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                    ah: s.ah as *mut ffi::ibv_ah,
                    remote_qpn: s.qpn,
                    remote_qkey: s.qkey,
                };
            }
            for i in 0..n {
                wrs[i].sg_list = &mut sges[i];
                wrs[i].next = if i + 1 < n {
                    &mut wrs[i + 1]
                } else {
                    ptr::null_mut()
                };
            }
            let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
            let post = (*(*self.qp).context)
                .ops
                .post_send
                .ok_or((0, libc::ENOSYS))?;
            let rc = post(self.qp, wrs.as_mut_ptr(), &mut bad);
            if rc != 0 {
                let posted = (0..n).find(|&i| ptr::eq(&wrs[i], bad)).unwrap_or(0);
                return Err((posted, rc));
            }
        }
        Ok(())
    }

    /// Up to `max` (at most [`VERBS_BURST_MAX`]) receive completions, as
    /// (slot, fields) pairs, into `out`. Returns how many.
    fn poll_recv(
        &mut self,
        max: usize,
        out: &mut [(u64, RecvCompletion); VERBS_BURST_MAX],
    ) -> usize {
        // SAFETY: ibv_wc is plain data; zeroed is a valid value.
        let mut wcs: [ffi::ibv_wc; VERBS_BURST_MAX] = unsafe { std::mem::zeroed() };
        let n = poll(self.recv_cq, &mut wcs[..max.min(VERBS_BURST_MAX)]);
        for (o, wc) in out.iter_mut().zip(&wcs[..n]) {
            *o = (
                wc.wr_id(),
                RecvCompletion {
                    status: wc.error().map_or(0, |(s, _)| s),
                    byte_len: wc.len() as u32,
                    src_qp: wc.src_qp,
                    slid: wc.slid,
                    grh: wc.wc_flags.0 & ffi::ibv_wc_flags::IBV_WC_GRH.0 != 0,
                    imm: wc.imm_data().map(u32::from_be),
                },
            );
        }
        n
    }

    /// Up to [`VERBS_BURST_MAX`] send completions, as (wr_id, ok) pairs.
    fn poll_send(&mut self, out: &mut [(u64, bool); VERBS_BURST_MAX]) -> usize {
        // SAFETY: as in poll_recv.
        let mut wcs: [ffi::ibv_wc; VERBS_BURST_MAX] = unsafe { std::mem::zeroed() };
        let n = poll(self.send_cq, &mut wcs);
        for (o, wc) in out.iter_mut().zip(&wcs[..n]) {
            *o = (wc.wr_id(), wc.is_valid());
        }
        n
    }

    fn ah_token(ah: &Ah) -> usize {
        ah.0 as usize
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this Device and is released
        // once, children before parents.
        unsafe {
            if !self.mr.is_null() {
                ffi::ibv_dereg_mr(self.mr);
            }
            if !self.qp.is_null() {
                ffi::ibv_destroy_qp(self.qp);
            }
            for cq in [self.recv_cq, self.send_cq] {
                if !cq.is_null() {
                    ffi::ibv_destroy_cq(cq);
                }
            }
            if !self.pd.is_null() {
                ffi::ibv_dealloc_pd(self.pd);
            }
            ffi::ibv_close_device(self.ctx);
        }
    }
}
