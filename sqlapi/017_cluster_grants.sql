-- ---------------------------------------------------------------------------------------------
-- Grants: users read clusters and managed objects; administration is dataenv_admin's.
-- ---------------------------------------------------------------------------------------------

REVOKE ALL ON dataenv.clusters, dataenv.cluster_secrets, dataenv.managed_databases, dataenv.datatable_roles FROM PUBLIC;
GRANT SELECT ON dataenv.cluster_info, dataenv.managed_database_list, dataenv.datatable_role_list
    TO dataenv_user, dataenv_admin;

REVOKE EXECUTE ON FUNCTION
    dataenv.register_cluster(text, text, integer, text, text, text, text),
    dataenv.update_cluster(text, text, integer, text, text, text, text, boolean, text, text),
    dataenv.remove_cluster(text),
    dataenv.setup_cluster(text),
    dataenv.create_database(text, text),
    dataenv.drop_database(text, text, boolean),
    dataenv.create_datatable_role(text, text, text),
    dataenv.drop_datatable_role(text, text),
    dataenv.managed_database_uses(text, text),
    dataenv.require_cluster(text, text),
    dataenv.lock_cluster_lifecycle(text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dataenv.register_cluster(text, text, integer, text, text, text, text),
    dataenv.update_cluster(text, text, integer, text, text, text, text, boolean, text, text),
    dataenv.remove_cluster(text),
    dataenv.setup_cluster(text),
    dataenv.create_database(text, text),
    dataenv.drop_database(text, text, boolean),
    dataenv.create_datatable_role(text, text, text),
    dataenv.drop_datatable_role(text, text),
    dataenv.managed_database_uses(text, text)
  TO dataenv_admin;
GRANT EXECUTE ON FUNCTION dataenv.check_name(text, text) TO dataenv_user, dataenv_admin;
-- The validators run as the inserting user: dataenv_admin reaches the cluster row through
-- require_cluster (SECURITY DEFINER); everyone else is stopped by require_dataenv_admin first.
GRANT EXECUTE ON FUNCTION dataenv.require_cluster(text, text) TO dataenv_admin;
