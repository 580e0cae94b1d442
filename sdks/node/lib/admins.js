'use strict';
// Admin addresses: one Registry client per address, the token metadata, and the rotation used
// for failover (the session and callbacks move to the next admin when one fails).
const grpc = require('@grpc/grpc-js');
const { xjob } = require('./proto');

function target(address) {
  if (address.startsWith('https://')) return { host: address.slice(8).replace(/\/+$/, ''), secure: true };
  if (address.startsWith('http://')) return { host: address.slice(7).replace(/\/+$/, ''), secure: false };
  return { host: address.replace(/\/+$/, ''), secure: false };
}

class Admins {
  // credentials: of https:// admins (default: the system's roots, no client certificate).
  constructor(addresses, accessToken, credentials = null) {
    if (!addresses.length) throw new Error('at least one admin address is required');
    this.addresses = [...addresses];
    this.index = 0;
    this.clients = new Map();
    this.accessToken = accessToken || '';
    this.credentials = credentials;
  }

  get current() {
    return this.addresses[this.index % this.addresses.length];
  }

  advance() {
    this.index = (this.index + 1) % this.addresses.length;
  }

  metadata() {
    const metadata = new grpc.Metadata();
    if (this.accessToken) metadata.set('authorization', `Bearer ${this.accessToken}`);
    return metadata;
  }

  registry(address) {
    let client = this.clients.get(address);
    if (!client) {
      const { host, secure } = target(address);
      const credentials = secure ? (this.credentials || grpc.credentials.createSsl()) : grpc.credentials.createInsecure();
      client = new xjob.Registry(host, credentials);
      this.clients.set(address, client);
    }
    return client;
  }

  close() {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

module.exports = { Admins };
