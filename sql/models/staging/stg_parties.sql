-- stg_parties: the account's customers (parties), named by tracking requests.
-- Grain: one row per party.
-- Key: party_id

with source as (
    {{ contract_source('parties', [
        ['id', 'varchar'],
        ['company_name', 'varchar']
    ]) }}
)

select
    id as party_id,
    company_name
from source
