/* splitkv's C shim over DPDK's `static inline` fast-path functions, which
 * bindgen cannot bind (they have no symbol in the shared libraries). Each
 * function here is a plain call of the inline one, compiled with DPDK's own
 * cflags (build.rs). */
#ifndef SPLITKV_DPDK_SHIM_H
#define SPLITKV_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

/* rte_eth_rx_burst / rte_eth_tx_burst on (port, queue). */
uint16_t splitkv_dpdk_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t splitkv_dpdk_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);

/* rte_pktmbuf_alloc (NULL when the pool is empty), rte_pktmbuf_alloc_bulk
 * (0 on success, all or nothing), rte_pktmbuf_free (the whole chain). */
struct rte_mbuf *splitkv_dpdk_pktmbuf_alloc(struct rte_mempool *mp);
int splitkv_dpdk_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n);
void splitkv_dpdk_pktmbuf_free(struct rte_mbuf *m);

/* Data accessors: the first segment's data (rte_pktmbuf_mtod), its length
 * (data_len), the whole packet's length (pkt_len), the segment count. */
uint8_t *splitkv_dpdk_mbuf_data(struct rte_mbuf *m);
uint16_t splitkv_dpdk_mbuf_data_len(const struct rte_mbuf *m);
uint32_t splitkv_dpdk_mbuf_pkt_len(const struct rte_mbuf *m);
uint16_t splitkv_dpdk_mbuf_nb_segs(const struct rte_mbuf *m);
/* rte_pktmbuf_append: NULL when the tailroom is too small. */
uint8_t *splitkv_dpdk_mbuf_append(struct rte_mbuf *m, uint16_t len);
/* rte_pktmbuf_chain: 0, or -EOVERFLOW past the segment limit. */
int splitkv_dpdk_mbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);

/* Sets a single-segment mbuf's data_len and pkt_len to len (its data must
 * hold len bytes from the data offset: the caller appended at least as many
 * before). */
void splitkv_dpdk_mbuf_set_len(struct rte_mbuf *m, uint16_t len);
/* rte_mbuf_refcnt_update (returns the new count) and rte_mbuf_refcnt_read
 * followed by an acquire fence, so a count of 1 orders the caller after
 * every former holder's last access. */
uint16_t splitkv_dpdk_mbuf_refcnt_update(struct rte_mbuf *m, int16_t delta);
uint16_t splitkv_dpdk_mbuf_refcnt_read(const struct rte_mbuf *m);

/* rte_errno of the calling thread (a per-lcore variable). */
int splitkv_dpdk_errno(void);

#endif
