/* See shim.h. */
#include "shim.h"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

uint16_t splitkv_dpdk_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t splitkv_dpdk_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *splitkv_dpdk_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int splitkv_dpdk_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void splitkv_dpdk_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

uint8_t *splitkv_dpdk_mbuf_data(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, uint8_t *);
}

uint16_t splitkv_dpdk_mbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t splitkv_dpdk_mbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t splitkv_dpdk_mbuf_nb_segs(const struct rte_mbuf *m)
{
	return m->nb_segs;
}

uint8_t *splitkv_dpdk_mbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return (uint8_t *)rte_pktmbuf_append(m, len);
}

void splitkv_dpdk_mbuf_set_len(struct rte_mbuf *m, uint16_t len)
{
	m->data_len = len;
	m->pkt_len = len;
}

uint16_t splitkv_dpdk_mbuf_refcnt_update(struct rte_mbuf *m, int16_t delta)
{
	return rte_mbuf_refcnt_update(m, delta);
}

uint16_t splitkv_dpdk_mbuf_refcnt_read(const struct rte_mbuf *m)
{
	uint16_t n = rte_mbuf_refcnt_read(m);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return n;
}

int splitkv_dpdk_mbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail)
{
	return rte_pktmbuf_chain(head, tail);
}

int splitkv_dpdk_errno(void)
{
	return rte_errno;
}
